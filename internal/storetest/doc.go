// Package storetest is the conformance suite every sluice store runs, so
// that the Go model in internal/algo, the memory store and the Redis Lua
// scripts cannot drift apart.
//
// A store's test calls Run with a Factory that returns a fresh, empty
// limiter reading time from the given function:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, now func() time.Time) sluice.Limiter {
//			s, err := memstore.New(memstore.Options{Now: now})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// The suite uses nothing but the sluice.Limiter interface. Every subtest
// asks for its own limiter (a Redis store gives each one a unique key
// prefix) and makes at most a few thousand checks, so that a store with a
// network round trip per check runs it in seconds.
//
// What it holds every store to:
//
//   - the worked examples of docs/design.md as step tables on a fake Clock, for
//     every algorithm: a fresh 10r/m admits exactly 10 and denies the 11th
//     with the algorithm's RetryAfter; Cloudflare's 50r/m example; seed
//     o1.rate-limiter's "1r/5s, 5r/h" and seed LUA_rateLimiting's shared
//     resource with per-consumer limits (Check.Group), decided all or
//     nothing;
//   - the contract: cost 0 peeks, a cost above Rate is sluice.ErrInvalid,
//     Reset forgets, a denied check records nothing on any hit, shadow hits
//     record and never deny, hits with the same identity share state, a
//     done context is an error and changes nothing;
//   - RetryAfter: for every denial in seeded random traffic, the same check
//     passes after exactly RetryAfter and fails noticeably earlier (one
//     microsecond for log and gcra, 1% of the wait for the estimators);
//   - the model: on seeded random traffic, every algorithm's Used equals its
//     formula recomputed from the admitted events, log and gcra never admit
//     more than their model allows in any interval, and the estimators stay
//     within their documented error of the exact count;
//   - isolation: keys and zones made of braces, colons, spaces, newlines,
//     invalid UTF-8 and 10 KB of bytes never share state;
//   - concurrency: many goroutines on a few keys, on the real clock frozen
//     at one instant, admit exactly Rate per key, and a shared resource is
//     never over-spent (run it under -race).
package storetest
