// Package algo holds sluice's five rate-limiting algorithms as pure
// functions of (state, now, cost): no I/O, no clock, no locks. Stores own
// the state and the clock. The Redis Lua scripts in redisstore/scripts
// compute the same answers with the same arithmetic, except where the
// storage differs: log.lua keeps one sorted-set member per check and a
// running sum (Log merges events of one µs and sums its slice). Refunder is
// what the scripts do to take back a cost (a check across Cluster slots
// denied in another slot). redisstore computes the reported figures from
// the state the scripts read, with this package, for every algorithm but
// log: log.lua replies the usage, RetryAfter and newest event it computed
// from the events it keeps, and redisstore derives Remaining and
// ResetAfter from them. Its model tests hold the scripts' decisions,
// figures and writes to this package on random traffic (one check at a
// time with refunds and a clock that steps back, and coalesced concurrent
// calls), and the conformance suite holds every store to the contract.
//
// # Units
//
// Times are int64 microseconds since the Unix epoch and durations are int64
// microseconds: Lua numbers are doubles, exact only to 2^53, which holds
// microseconds since 1970 but not nanoseconds. Rates are at most
// sluice.MaxRate (1e9), which keeps every integer the scripts compute below
// 2^53.
//
// # Boundaries
//
// GCRA decides on integers (its arrival time is whole µs plus a fraction in
// 1/Rate µs), and Log on integer sums: both are exact. The estimators
// (sliding-window, buckets, decay) compare used + cost <= rate in float64
// with a slack of 1e-9 + 1e-12·rate units (see fits). The slack absorbs
// rounding in their formulas, so that waiting exactly RetryAfter (rounded up
// to the next microsecond) passes, and it is far too small to admit a whole
// extra unit below MaxRate: a fresh limit admits exactly Rate unit checks
// (TestFreshAdmitsExactlyRate).
package algo
