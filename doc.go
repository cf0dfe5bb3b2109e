// Package sluice is a sliding-window rate limiter whose counters can be shared
// by many processes.
//
// A [Limit] says how much cost may be spent per sliding window and which
// [Algorithm] estimates the usage. A [Check] asks for one cost on one or more
// hits (a key under a limit) and a [Limiter] answers with a [Decision]: the
// check is allowed only if every hit stays within its limit, and only then is
// the cost recorded, on every hit. A denied check records nothing. [Allow]
// is shorthand for the common case: one key, one limit, cost 1.
//
// Where the state lives is the Limiter's business: package memstore keeps it
// in process memory (the embedded default), package redisstore in Redis
// (standalone, Sentinel or Cluster) changed only by atomic Lua scripts. Every
// store passes one conformance suite, so a limit means the same thing in each.
//
// # Errors
//
// A denial is a result, not an error. Check returns an error only when it
// could not decide: invalid input (errors.Is(err, ErrInvalid)), a store that
// cannot be reached (errors.Is(err, ErrUnavailable)), stored state that is
// not sluice's, which fails that check alone (errors.Is(err, ErrBadState)),
// or a context that is done.
//
// # Time
//
// Windows are aligned to the Unix epoch and measured in microseconds, the
// unit shared by the Go algorithms and the Redis scripts. A Window or
// Resolution finer than a microsecond is rejected.
//
// # Shadow mode
//
// A shadow limit (Limit.Shadow, or Check.Shadow for every hit) is evaluated
// and recorded as if it had allowed the check, but never denies: the
// Decision reports what it would have done in Decision.Shadowed and in the
// hit's result. This is how to measure a rate (seed strafe's "measure") or
// try a new limit in production before enforcing it.
package sluice
