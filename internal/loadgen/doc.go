// Package loadgen is the load generator behind "sluice bench": workers
// that run an operation in a loop for a duration or a number of
// operations, count what it answered, and time it.
//
// Decisions made here:
//
//   - Each worker owns its tallies and its Histogram, so recording costs no
//     synchronisation; only the operation count is atomic, for the progress
//     line. Histograms are merged once, at the end.
//   - Latency is kept in log-linear buckets (HDR-like, 128 per power of
//     two), so memory is fixed (about 57 KiB per worker) whatever the length
//     of the run, and percentiles are within 0.8% of the truth, never
//     below it.
//   - A failed operation is counted but not timed: a fast refusal must not
//     make the latency look better.
//   - An operation cut short by the end of the run (its context ended) is
//     not counted at all.
//   - With a request bound, workers draw from a shared budget, so exactly
//     that many operations run, however they spread over workers.
//   - Keys are generated up front ("bench-0" ...), at most MaxKeys, and each
//     worker draws them from its own generator seeded by its number, so a
//     run's key sequence per worker is reproducible.
//   - HTTP targets use one keep-alive connection per worker (the
//     transport's idle pool is sized to the concurrency), a timeout on every
//     request, and read every response to the end so the connection is
//     reused. 2xx is allowed, 429 denied, anything else a failure.
package loadgen
