// Package edge is the in-process layer in front of any sluice.Limiter: a
// [Guard] that keeps deciding when the store cannot (timeouts, a store
// breaker, a failure policy) and a [DenyCache] that repeats recent denials
// without asking the store. Both are sluice.Limiters themselves, so they
// stack; the usual order is
//
//	store := redisstore ...                          // or memstore
//	breaker, _ := edge.NewBreaker(edge.BreakerOptions{Name: "redis", Logger: log})
//	guard, _ := edge.NewGuard(store, edge.GuardOptions{Breaker: breaker, Policy: edge.PolicyOpen, Logger: log})
//	limiter, _ := edge.NewDenyCache(guard, edge.DenyCacheOptions{})
//
// The deny cache goes outside the guard: it keeps denying known offenders
// during an outage (correctly: see below), and its hits never reach the
// store or count against it.
//
// # Failure policy
//
// A Guard gives every store call a context that ends after
// GuardOptions.Timeout (50 ms by default). A call that fails with
// sluice.ErrUnavailable, or does not answer in time, is a store failure:
// the Guard decides the check by its Policy, returns nil, and says so in
// Decision.Source:
//
//   - PolicyOpen (the default): allowed, Source sluice.FromFailOpen;
//   - PolicyClosed: denied, Source sluice.FromFailClosed;
//   - PolicyLocal: decided by an in-process limiter (a memstore.Store by
//     default), Source sluice.FromFallback.
//
// Under open and closed the decision has no hit results (Hits is empty and
// Denier reports no hit): nothing is known about the hits; a fail-closed
// denial's RetryAfter is FailClosedRetryAfter. Under local, Hits are the
// fallback's. A deadline is a deadline, the timeout's or the caller's own if
// it comes first: the store did not answer in the time it had, and the
// caller still gets a decision. Every other error is returned unchanged and
// is not a store failure: bad input (sluice.ErrInvalid) is the caller's, a
// caller that canceled its context went away, and a context already done
// before the call never reaches the store. Bad input is an error even when
// the store is not called: the Guard validates the check itself before
// deciding without the store, so a fail-open policy never lets a malformed
// check through.
//
// The Guard returns at the deadline even when the store does not. While the
// store is healthy it is called on the caller's goroutine, which costs
// nothing; once a call has failed, and until one succeeds (and always for
// the breaker's probe), each call runs on its own goroutine with copies of
// the check and the decision, and the Guard stops waiting for it at the
// deadline. This matters: we saw rueidis, the Redis client, block for about
// a second past its context while it reconnected to a server that accepts
// connections and never answers. A call given up on finishes in the
// background and touches nothing of the caller's; at most MaxAbandoned
// (1024) may be pending per Guard, past which the store is not called
// (GuardStats.Abandoned counts them). The first call to fail after a healthy
// spell is made on the caller's goroutine, so it is bounded by the store
// honouring its context, which rueidis does on an established connection.
//
// Reset is not decided by a policy: while the store is failing it returns
// an error wrapping sluice.ErrUnavailable. Under PolicyLocal it resets the
// fallback as well, first.
//
// # Breaker
//
// After BreakerOptions.Failures consecutive failed calls (5), the [Breaker]
// opens: checks are decided by the policy at once, without any I/O, for a
// back-off (500 ms). Then one call, the probe, goes through while every
// other check is still decided without the store. A probe that answers
// closes the breaker and exact limiting resumes by itself; a probe that
// fails doubles the back-off, up to BreakerOptions.MaxBackoff (5 s). Each
// back-off is shortened by a random jitter of up to a quarter, so a fleet
// that lost the same Redis does not probe it in step. A probe that ends in
// neither way (bad input, the caller canceling) lets the next check probe at
// once. Any answer from the store closes the breaker, probe or not.
//
// The failure policy is per zone; the store is not. So the Breaker is its
// own type, shared: give every Guard in front of one store the same
// Breaker (GuardOptions.Breaker), each with its zone's policy. One zone's
// failures then spare the store the calls of all, and all zones recover on
// the first successful probe. A Guard without a Breaker gets one of its own.
//
// The Breaker starts no goroutine and no timer: its state changes when a
// Guard asks it or reports to it, reading BreakerOptions.Now. Nothing in
// this package runs in the background or needs closing; the only
// goroutines are the Guard's detached store calls while the store fails,
// each ending when its call returns.
//
// # What is logged and counted
//
// The Breaker logs one line per state change (opened, probe failed, closed,
// with the error, the back-off and the outage's length); the Guard logs the
// decisions it takes without the store at most once per
// GuardOptions.LogInterval (10 s), each line counting the decisions it
// stands for ("suppressed"). So an outage writes a handful of lines, not one
// per request. Loggers are passed in Options; the default logs nothing.
//
// Counters are atomic and read with Stats: [GuardStats] (decisions by
// degraded source, store errors, timeouts, checks skipped by the open
// breaker), [BreakerStats] (state, consecutive failures, opens, probes,
// failed probes) and [DenyCacheStats] (hits, denials stored, evictions,
// entries). This package does not import a metrics library; the server
// exports these as Prometheus metrics.
//
// # Deny cache
//
// After the limiter denies a check, a [DenyCache] denies the same check
// (same hits, cost and group) locally until the denial's RetryAfter has
// passed, with Source sluice.FromDenyCache and the stored hit results, their
// RetryAfter and ResetAfter shortened by the time since (Used and Remaining
// are as the store last reported them). This loses no accuracy: a denied
// check records nothing, and other checks, from this process or any other,
// can only add usage, so the same check stays denied at least until its
// RetryAfter. The cache therefore never denies a check the store would
// allow, with two bounds on "never":
//
//   - Time is counted from the moment the check was sent, which is no later
//     than the store's decision.
//   - For log and gcra, whose RetryAfter is exact, a denial is held for
//     exactly RetryAfter. The estimating algorithms (sliding-window,
//     buckets, decay) compute RetryAfter in floating point, tight to 1%;
//     their denials are held 1% and a microsecond less.
//
// TestDenyCacheNeverDeniesWhatTheStoreAllows checks this on every algorithm:
// two identical stores, one behind the cache, see the same traffic, other
// processes' included, and every decision of the cache must equal the other
// store's, also when retried a microsecond around the end of a denial.
//
// What the cache cannot see: a Reset made through another process (another
// server, the CLI against Redis), or a limit raised by a config change that
// keeps the Limit value (a changed Limit is a different check). Both are
// bounded by DenyCacheOptions.MaxAge (1 minute): no denial is repeated for
// longer. A Reset through the cache itself forgets every stored denial of a
// check that has a hit with the same zone and key, whatever its limit, and a
// denial that was being decided while the reset ran is not stored.
//
// Only denials the store made (Source sluice.FromStore) are stored: not a
// fail-closed denial, not the fallback's. Peeks (cost 0) and shadow checks
// pass straight through. The cache holds at most DenyCacheOptions.MaxEntries
// (10,000) denials in up to 32 independently locked shards, each forgetting
// its least recently used entry when full; an expired entry is dropped when
// next seen. A cache hit takes one hash and one shard lock and does not
// allocate.
package edge
