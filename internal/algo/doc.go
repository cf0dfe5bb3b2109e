// Package algo holds sluice's five rate-limiting algorithms as pure
// functions of (state, now, cost): no I/O, no clock, no locks. Stores own
// the state and the clock; the Redis Lua scripts in redisstore/scripts are
// line-for-line translations of this package, and the conformance suite
// holds both to the same answers.
//
// # Units
//
// Times are int64 microseconds since the Unix epoch and durations are int64
// microseconds: Lua numbers are doubles, exact only to 2^53, which holds
// microseconds since 1970 but not nanoseconds.
//
// # Boundaries
//
// A check fits when used + cost <= rate, compared in float64 with a slack of
// 1e-9 + 1e-12·rate units (see fits). The slack absorbs rounding in the
// estimating formulas, so that waiting exactly RetryAfter (rounded up to the
// next microsecond) always passes, and it is far too small to admit a whole
// extra unit: a fresh 10r/m admits exactly 10 unit checks.
package algo
