// Package sim measures how well each of sluice's algorithms (package
// internal/algo) follows the exact sliding window, the way Cloudflare
// measured its two-counter estimate: on a trace of requests from many
// sources, every algorithm's verdict and estimate at every request is
// compared with the exact count. It is what "sluice simulate" runs.
//
// # Method
//
// The limit is Rate requests per sliding Window; every request costs 1.
//
//   - Shadow mode (the default, Cloudflare's method): every request is
//     recorded by every algorithm, whatever its verdict, as a measuring
//     (shadow) limiter does. The algorithms then all see the same history
//     and so does the reference.
//   - The real rate of a source at a request at instant now is the exact
//     number of its requests in (now − Window, now], this one included,
//     counted with integers (no rounding, no drift).
//   - An algorithm's estimate at that request is its Used before the request
//     plus the request: Eval(now, 1).Used + 1, the usage it would report
//     just after recording it.
//   - The exact verdict limits the request when real > Rate; the algorithm's
//     verdict is its own Eval(now, 1).Allowed, i.e. it limits when
//     estimate > Rate (with algo's rounding slack). A request is wrongly
//     allowed when the algorithm allows and the exact verdict limits, and
//     wrongly denied in the opposite case. Both are shares of all requests.
//   - The mean rate difference is the mean over all requests of
//     |estimate − real| / real (real ≥ 1, since it counts the request).
//   - A source is really over when the exact verdict limits at least one of
//     its requests, and limited when the algorithm limits at least one.
//     Falsely limited: limited but never really over. Falsely let through:
//     really over but never limited; the worst miss is the highest real rate
//     among those sources, as a share above Rate.
//
// Enforcing mode (Options.Enforce) is the other reading: a request an
// algorithm limits is not recorded by it, as in a real limiter. Each
// algorithm's history then differs, so each gets its own exact reference,
// counting only what that algorithm admitted: wrongly allowed means "admitted
// although its admitted count would exceed Rate", wrongly denied "limited
// although it would fit".
//
// The log algorithm is the reference's own model, so it must show no error
// in either mode; the tests hold it to that. The decay and gcra algorithms
// are different models of a rate (a decayed count; a theoretical arrival
// time whose Used is the cost still "in flight", which stays near 1 for a
// source under its rate): their disagreement with the window is what
// choosing them means, not a defect of their implementation.
//
// # Trace
//
// NewTrace generates a seeded trace: the same TraceOptions give the same
// requests on every platform and Go release (the generator is splitmix64,
// written here, not math/rand). Sources fall into four classes, numbered
// in this order:
//
//   - steady-under, 2% of the sources and 20% of the requests: a regular
//     pace (each request up to half a period late) at a fixed 80–99% of the
//     threshold, over a session; never really over when Rate ≥ 50 (with
//     fewer, the jitter can put one request too many in a window).
//   - steady-over, 2% and 20%: the same at 101–125%.
//   - bursty, 2% and 15%: about one burst per 1.4 thresholds of requests,
//     each of 30–250% of the threshold spread over 5–100% of a window, one
//     burst per equal slot of the duration.
//   - background, the other 94% of the sources and the remaining requests:
//     sizes from a Pareto law of shape 1.2 truncated at 1000 times the
//     smallest (a heavy tail), split by largest remainder so that the trace
//     has exactly the requested number of requests; Poisson arrivals over a
//     session of log-uniform length between one window (longer for large
//     sources, which stay under 50 times the threshold on average) and the
//     whole duration.
//
// The steady and bursty sessions are sized so that each class gets its
// share of requests on average, whatever the number of requests and
// sources; a session never exceeds the duration (a steady source then
// sends fewer requests, and the background more).
//
// The trace is deliberately hard: 55% of its requests come from sources
// that sit near the threshold or cross it in bursts, where every estimate
// errs. Real traffic, such as Cloudflare's, mostly stays far from its
// threshold; the per-class results (Report.Classes) show each part.
//
// # Scale
//
// Sources are independent, so the trace is never materialised: a Trace
// keeps one count per source and generates a source's requests when asked;
// Run's workers take sources in chunks of 64 and hold one source at a time.
// Memory is bounded by the largest source, and the results are merged in
// chunk order, so a report is the same bit for bit whatever the number of
// workers. Each request costs one Eval and one Record per algorithm; the
// log's cost grows with the number of requests in the window.
package sim
