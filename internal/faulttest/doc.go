// Package faulttest holds sluice's failure tests against real Redis
// processes that the tests kill, stop, restart and fail over (started by
// internal/redistest), and the exactness test across OS processes. It has
// no code of its own: everything is in its _test.go files.
//
// What the tests show, for the Redis store behind package edge's Guard and
// DenyCache:
//
//   - Redis killed (SIGKILL) or hung (SIGSTOP): every check returns within
//     the Guard's timeout plus 5 ms (p99 over 1,000 checks) with the
//     failure policy applied, and no goroutine is left behind; with a
//     breaker that never opens, no check waits for the store past the
//     timeout, even through rueidis's reconnections.
//   - Redis restarted: exact limiting resumes by itself, with the same
//     Store and Guard.
//   - A Cluster master killed: once its replica is promoted, checks succeed
//     again, also when the promoted node has no script loaded (NOSCRIPT).
//   - SCRIPT FLUSH between two checks: the second check succeeds.
//   - Four OS processes with 16 goroutines each hammering one key through
//     log and gcra, on standalone and on the Cluster (and on standalone also
//     with the edge layer in front of the store), admit exactly what the
//     limit allows in total.
//
// The helper processes of the last test are the test binary itself, run
// again with SLUICE_FAULTTEST_WORKER set (see TestMain).
package faulttest
