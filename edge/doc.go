// Package edge is the in-process layer in front of any sluice.Limiter: a
// [Guard] that keeps deciding when the store cannot (timeouts, a store
// breaker, a failure policy), a [DenyCache] that repeats recent denials
// without asking the store, and an [Async] limiter that decides from a
// local view of the shared usage and counts in the background. All are
// sluice.Limiters themselves, so they stack; the usual order is
//
//	store := redisstore ...                          // or memstore
//	breaker, _ := edge.NewBreaker(edge.BreakerOptions{Name: "redis", Logger: log})
//	guard, _ := edge.NewGuard(store, edge.GuardOptions{Breaker: breaker, Policy: edge.PolicyOpen, Logger: log})
//	limiter, _ := edge.NewDenyCache(guard, edge.DenyCacheOptions{})
//
// The deny cache goes outside the guard: it keeps denying known offenders
// during an outage (correctly: see below), and its hits never reach the
// store or count against it. An asynchronous limiter replaces the deny
// cache, in front of the guard:
//
//	async, _ := edge.NewAsync(guard, edge.AsyncOptions{SyncInterval: 100 * time.Millisecond})
//	defer async.Close(ctx) // sends what is still owed
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
// Guard asks it or reports to it, reading BreakerOptions.Now. Apart from
// Async (below), nothing in this package runs in the background or needs
// closing; the Guard's only goroutines are its detached store calls while
// the store fails, each ending when its call returns.
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
// failed probes), [DenyCacheStats] (hits, denials stored, evictions,
// entries, bytes) and [AsyncStats] (local and synchronous decisions,
// pending cost, flushes and their latency, view age, dropped and
// unrecorded cost). This package does not import a metrics library; the server
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
// pass straight through.
//
// The cache keeps no string of a check. A denial is stored under a 128-bit
// fingerprint of the check's identity (cost, group, shadow flag and, per
// hit, zone, key and limit: everything but the limit's name, which changes
// nothing the store decides), keyed by a random secret per cache, with the
// decision's fixed-size hit results and a 64-bit digest of each hit's zone
// and key (for Reset). A one-hit denial takes 128 bytes however long its
// keys; the cache's heap, table included, is bounded by
// DenyCacheOptions.MaxBytes (4 MiB). The table is set-associative (8 slots
// per set) and read without a lock: a hit hashes each key once, reads the
// monotonic clock once, loads a few atomic pointers and allocates nothing.
// Writers (a new denial, a Reset) take one mutex; they follow a store call,
// which costs far more. When full, the cache forgets denials by CLOCK
// (second chance): a hit sets its denial's reference bit (once per pass of
// the hand, so hot denials are not written on every hit) and the hand
// spares referenced denials once. Expired denials are dropped as the hand
// or a new denial of their set finds them.
//
// # Asynchronous mode
//
// An [Async] limiter decides checks without the store. For each key (hit,
// group and shadow flag) it keeps a view, the store's last answer about it
// (what remained, and when), and the cost admitted here and not yet
// recorded by the store (pending, and in flight). A check whose keys all
// have a view younger than AsyncOptions.MaxViewAge (1m) is decided
// locally, Source sluice.FromLocalView: a non-shadow hit allows if its
// unrecorded cost plus the check's fits in its budget, what remained at the
// last answer divided by AsyncOptions.Processes (rounded up). An allowed
// check adds its cost to each key's pending cost. A key without a usable
// view (first seen, stale, or the table full) is checked by the store
// synchronously, and the answer becomes its view.
//
// Pending cost goes to the store in flush rounds: every SyncInterval
// (100 ms), and at once for the keys whose unrecorded cost reaches half
// their budget. One coordinating goroutine runs the rounds, one at a time;
// Flushers (16) goroutines make the store calls. Keys that owe the same
// cost (with the same group and shadow flag) go together, up to 16 in one
// check; if the store denies that check (a key filled meanwhile), nothing
// was recorded and each key is sent by itself. The Redis store further
// coalesces concurrent calls into batched script calls. Keys wait on one queue, each at most once, so the
// queue is bounded by MaxKeys (100,000). No goroutine or timer is started
// per request. A slow store makes rounds longer, each carrying more cost
// per key, rather than piling calls up. The reply to a flush is the key's
// new view. A key denied here whose view is older than SyncInterval is
// queued for a refresh (a peek), so a refill is seen within an interval.
// Close sends everything pending before it returns.
//
// Why 100 ms: keys near their limit are sent as soon as they use half
// their budget, so the interval mostly bounds how stale other processes'
// view of the other keys is, and the store's load: one call per active key
// per interval and process. 100 ms keeps the view of a busy key within a
// tenth of a second and cuts the store's calls for a key admitted 10,000
// times a second by 1,000; spread workloads, whose keys see a few checks
// a second each, are bounded by how fast the store takes flushes, not by
// the interval (see README.md, Measured).
//
// # Accuracy bound
//
// A store denial records nothing, so a flush that does not fit records
// what remains (the store's Remaining) and the rest is over-admission that
// is seen and counted (AsyncStats.Unrecorded); the key's view is then zero
// until a refresh says otherwise. Each process admits, between two answers
// about a key, at most its budget ceil(R/P), R being what remained at the
// last answer and P AsyncOptions.Processes; and at most what it admits in
// one round, λ·(T + 2L) for a local rate λ on the key, sync interval T and
// flush round length L. Hence, for N processes sharing a key whose limit
// is Rate per window, when the key fills:
//
//	over-admission ≤ N · min(ceil(Rate/P), λ·(T + 2L))
//
// With P = N (each process told the fleet's size) that is at most about
// one Rate, and N·λ·(T + 2L) when the local rates are low; with P = 1
// (the default, Kong's sync_rate behaviour) up to N·Rate. The bound holds
// at each filling; a key that refills within a window (sliding windows,
// decay, gcra) may fill again, and each refill r may be admitted up to N/P
// times over. TestAsyncOverAdmissionBound measures it on real Redis: N = 4
// limiters, 64 callers, one key of 1000 per hour, T = 50 ms.
//
// # Async and failures
//
// A flush that fails (sluice.ErrUnavailable, a timeout, or a decision not
// made by the store, such as a Guard's failure policy) leaves the cost
// owed; the key is sent again at the next round. Meanwhile checks are
// still decided from the views, until they are older than MaxViewAge; then
// they go to the wrapped limiter, which for a Guard means its failure
// policy (without I/O once its breaker is open). So put the Async in front
// of a Guard, not of a DenyCache (whose answers are not the store's).
// What is owed is bounded: at most MaxKeys keys, each owing at most its
// budget (local decisions never admit past it). Cost owed for longer than
// its limit's window is dropped, not sent (it would count in the wrong
// window), and so is what Close could not send before its context ended;
// both are counted in AsyncStats.Dropped. A Reset forgets the key's view
// and pending cost, then resets the store.
package edge
