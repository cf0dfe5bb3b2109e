// Package sim measures how well each of sluice's algorithms (package
// internal/algo) follows the exact sliding window, the way Cloudflare
// measured its two-counter estimate, and how far each keeps its own
// promise. It is what "sluice simulate" runs; docs/accuracy.md has the
// method, the traces and the measured tables.
//
// Run replays every source of a Workload through each algorithm, with a
// limit of Rate requests per sliding Window and every request costing 1:
//
//   - In shadow mode (the default, Cloudflare's method) a counting
//     algorithm records every request, whatever its verdict, as a measuring
//     limiter does; a GCRA records only what it allows, as every GCRA does
//     (a denied request is not scheduled).
//   - In enforcing mode (Options.Enforce) every algorithm records only what
//     it allows.
//
// Each algorithm is compared, at every request, with the exact count of the
// history it recorded (integers, no rounding): its verdicts (wrongly
// allowed, wrongly denied), its usage as an estimate of that count (the
// mean rate difference; not for gcra, whose usage is the cost still in
// flight), and per source (falsely limited, falsely let through).
//
// Each is also compared with what it promises, replayed exactly on the
// same history: the exact window for sliding-window, buckets and log (they
// estimate it), an AR1 decayed count with no cut-off for decay, GCRA in
// integer arithmetic for gcra (Result.Model, ModelWronglyDecided,
// ModelMeanDiff).
//
// In enforcing mode, the figure that tells what an algorithm lets through
// is the worst true window (Result.WorstWindow): for every source whose
// offered requests exceed Rate in some window, the most requests the
// algorithm admitted in any window of length Window, over every position,
// in units of Rate; its mean over those sources and its maximum.
//
// NewTrace generates a seeded trace (the same TraceOptions give the same
// requests on every platform and Go release) of four classes of sources,
// steady under, steady over, bursty and a heavy-tailed background, mixed
// by a profile: Harsh, with most requests near or over the threshold, or
// Cloudflare, with most sources far below it. A Trace generates a source's
// requests on demand and Run's workers hold one source at a time, so memory
// does not grow with the number of requests; the report is the same bit
// for bit whatever the number of workers.
package sim
