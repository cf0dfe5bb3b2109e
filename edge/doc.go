// Package edge is the in-process layer in front of any sluice.Limiter. Each
// type is a sluice.Limiter itself, so they stack:
//
//	breaker, _ := edge.NewBreaker(edge.BreakerOptions{Name: "redis", Logger: log})
//	guard, _ := edge.NewGuard(store, edge.GuardOptions{Breaker: breaker, Policy: edge.PolicyOpen, Logger: log})
//	limiter, _ := edge.NewDenyCache(guard, edge.DenyCacheOptions{})
//	// or, deciding from a local view and counting in the background:
//	async, _ := edge.NewAsync(guard, edge.AsyncOptions{})
//	defer async.Close(ctx) // sends what is still owed
//
// docs/failure.md explains each in full, with the tests and measurements
// behind every claim; this is the model.
//
// # Model
//
//   - A [Guard] gives each store call a timeout. A call that fails with
//     sluice.ErrUnavailable or does not answer in time is a store failure:
//     the Guard decides by its [Policy] (open, closed, or local, an
//     in-process fallback) and says so in Decision.Source. Once a call has
//     failed, calls run detached so the Guard returns at its deadline even
//     when the store's client does not.
//   - A [Breaker], shared by the Guards in front of one store, opens after
//     consecutive failures: checks are then decided without I/O, and one
//     probe at a time, after a jittered back-off, tries the store again.
//     In front of a store made of parts that fail alone (a [Partitioner],
//     such as the Redis store on a Cluster) it keeps one state per part,
//     so one master's failure degrades only the checks it decides.
//   - A [DenyCache] repeats a denial by the store (same hits, cost, group)
//     until its RetryAfter has passed, without asking the store. Usage only
//     grows between a denial and its RetryAfter, so it never denies what
//     the store would allow. When a denial expires, one caller per check
//     at a time asks again; the others wait for its answer. While one
//     asks, hits now and then yield their processor, so that callers
//     checking in a loop do not starve the reply past its timeout.
//   - An [Async] limiter decides from a view of each key's state (the
//     store's last answer, less the cost admitted here and not yet sent)
//     and sends pending cost every SyncInterval, flush calls giving way
//     to checks that wait on the store. A key's first checks go to the
//     store, and its second answer becomes its view, so a key checked
//     once costs no slot. A key whose budget is spent is denied locally
//     only while a denial by the store stands; otherwise one caller asks
//     the store, for the key's unsent cost together with its own (a check
//     of several hits: after that cost is sent), and the others wait for
//     that answer: so it does not deny what the store would admit. A
//     hit whose window is not longer than SyncInterval is decided by the
//     store. Over-admission is bounded, per filling of a key shared by N
//     processes, by N·floor(Rate/Processes); a key held at its limit
//     is decided by the store (see docs/failure.md, "The accuracy
//     bound").
//
// # Defaults
//
// Guard timeout 50 ms, policy open; breaker after 5 failures, back-off
// 500 ms doubling to 5 s; deny cache 4 MiB, denials held at most 1 minute;
// async sync interval 100 ms, Processes 1, 16 flushers, 100,000 keys and
// 64 MiB tracked, views used for at most 1 minute, flush calls bounded by
// 1 s. Each Options field documents its own.
//
// # Errors
//
// Constructors return errors wrapping sluice.ErrInvalid for bad options.
// Check returns an error only when it could not decide: bad input
// (sluice.ErrInvalid, checked even when the store is not called), the
// caller's context ending, or, without a Guard below, the store's own
// error. A Guard turns store failures into decisions; its Reset returns
// sluice.ErrUnavailable while the store fails. Async.Close returns an
// error saying how much cost it dropped when its context ended first. The
// zero values are not usable: make each type with its constructor (the
// zero DenyCache and Async return sluice.ErrInvalid).
//
// # Concurrency
//
// Every type is safe for concurrent use. Nothing runs in the background
// except an Async's one coordinating goroutine and its flushers (Close
// stops them) and a Guard's detached store calls while the store fails
// (each ends when its call returns, at most MaxAbandoned pending). No
// goroutine or timer is started per request. Stats methods return atomic
// snapshots; loggers come through Options and default to nothing.
package edge
