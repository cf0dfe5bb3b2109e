// Package redisstore is a sluice.Limiter whose state lives in Redis
// (standalone, Sentinel or Cluster) and is changed only by atomic Lua
// scripts, so that every process using the same Redis and Prefix shares
// the same limits. Users' documentation, with measured figures, is in
// docs/redis.md.
//
//	s, err := redisstore.New(redisstore.Options{URL: "redis://localhost:6379"})
//	...
//	defer s.Close()
//	var d sluice.Decision
//	err = s.Check(ctx, sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: ip, Limit: limit}}, Cost: 1}, &d)
//
// # Connections
//
// Options.URL takes redis://[user:password@]host[:port][/db], rediss://
// (TLS), redis-sentinel://[user:password@]host:port[,host:port...]/master[/db]
// (the password is the data nodes'; a Sentinel's own credentials go in
// ?sentinel_username=&sentinel_password=), and redis-cluster://host:port[,
// host:port...] (seeds). rediss-sentinel:// and rediss-cluster:// use TLS.
// Ports default to 6379 (26379 for Sentinels). User and password are
// percent-decoded. The Store builds a rueidis client, the recommended one
// (automatic pipelining). Options.Client takes a rueidis client the caller
// owns; Options.Scripter any client behind the two-method Scripter interface
// (package redisstore/goredis adapts go-redis). A redis:// URL that names a
// Cluster node is detected as a Cluster by rueidis and handled as one.
//
// New connects at once: rueidis needs one successful connection to start,
// so an unreachable Redis at New is an error wrapping sluice.ErrUnavailable
// (after that, outages are per call and the client reconnects by itself).
//
// # Scripts
//
// The scripts are the files in scripts/, embedded. common.lua, one file
// per algorithm (window.lua, buckets.lua, log.lua, decay.lua, gcra.lua) and
// decide.lua (the body of a check) are concatenated in front of each entry
// script: check.lua decides a whole check (all hits, all or nothing, shadow
// hits recorded as if allowed) in one call; batch.lua decides many checks,
// one after the other (see Coalescing); refund.lua undoes a recorded cost
// (cross-slot checks); reset.lua deletes states. Each file opens with its KEYS, ARGV (with units), reply
// and complexity. The formulas mirror internal/algo operation by operation
// (same order of double operations, same slack in "fits", same µs and
// rounding of waits), and the conformance suite (internal/storetest) runs
// against the scripts on standalone, Sentinel and Cluster to keep them equal.
//
// Scripts are called by SHA-1 (EVALSHA). A NOSCRIPT reply (a new or
// restarted node, a promoted replica, SCRIPT FLUSH) makes the Store send
// the source once with EVAL, which caches it again; no separate SCRIPT LOAD
// round trip and no shared "loaded" flag that could go stale.
//
// Replies are arrays of strings; numbers are printed by the script with
// '%.17g', which round-trips every double (batch.lua prints integral values
// below 2^53 with '%d', the same text, faster), so a fractional Used crosses the
// wire exactly and never as a Lua float converted to a Redis integer. One
// function per reply shape (decodeCheck, and decodeBatchPart for
// batch.lua's compact form) checks and decodes it; any deviation is an
// error, never a guess. The rueidis client does not retry a script call by
// itself (it retries read-only commands only): a check is not idempotent.
//
// # Clock
//
// By default a script reads the Redis server's TIME: one clock for every
// process, immune to skew between application hosts. (Scripts call
// redis.replicate_commands() when it exists, so Redis 5 and 6 replicate the
// effects rather than the non-deterministic script; Redis 7 does that by
// default.) Options.Now replaces it with the caller's clock, sent in µs as
// an argument: for tests on a fake clock, and for callers that decide on
// their own clock.
//
// # Coalescing
//
// With 64 concurrent callers a Redis round trip per check leaves Redis
// mostly waiting on the network and the client. So a check whose hits are
// in one slot is queued, and up to 4 batch calls (batch.lua) are under way
// at a time, each taking up to Options.MaxBatch (default 64) of the queued
// checks. There is no timer: a check that finds a free call goes at once,
// so light load adds no latency, and batches grow with the load. batch.lua
// decides its checks one after the other, each with the same code as
// check.lua: each check is atomic and all or nothing, and the result is as
// if the checks had been sent one by one in queue order. In a Cluster a
// batch is split by hash slot (one call per slot); a check across slots is
// never batched (so in a Cluster, checks spread over many keys rarely
// share a call; hot keys and Groups do). The time a check waits in the
// queue counts against Options.Timeout, without a timer per check: each
// queued check carries its deadline, and a batch call runs until the
// earliest deadline of its checks (those ahead of it in the queue have
// earlier ones), so every check is answered or failed within its Timeout
// at the cost of one timer per batch. In a batch, a check that fails (a key of the wrong type
// under the prefix) fails alone, before writing anything. With the Redis
// clock, the checks of one call share one TIME reading. Workers are
// goroutines started only while there is work: an idle Store runs none.
// Close waits for the queued checks. MaxBatch 1 turns coalescing off.
//
// # Keys
//
// One key per (zone, key, limit identity), laid out as
//
//	<prefix><zone>{<tag>}:<algo><window µs>[/<bucket µs>][:<key>]
//
// for example sluice:api{203.0.113.7}:w60000000. algo is w, b, l, d or g.
// The hash tag is the hit's key, or the check's Group when set, and then
// the hit's key follows the identity. Every user-supplied part (zone, key,
// group) is percent-encoded: "%", "{", "}", ":", space, control bytes and
// every byte >= 0x80 become %XX. The result holds no brace, so Redis hashes
// exactly the intended tag; holds no ":", so parts cannot run into each
// other; and the encoding is injective, so no key reaches another's state.
// A part whose encoding is longer than 128 bytes is replaced by "%H" and
// its hex SHA-256 ("%H" never starts an escape), bounding key length
// whatever the input (keys of 64 KB are allowed by sluice). The prefix may
// not contain a brace (New refuses it).
//
// Decision: in Redis, a Group is part of a state's identity. The memory
// store ignores Group (it has no slots), but here the hash tag must be the
// same for every hit of the check, so the same (zone, key, limit) checked
// with and without a Group, or with two Groups, has separate states. Use a
// Group consistently for a key.
//
// State per algorithm: sliding-window, one string "index:cur:prev";
// buckets, one string "head:c0,...,cn"; log, one sorted set with one member
// "<cost>:<check id>" per event scored by its µs; decay, one string
// "<S>:<T0>" with S in '%.17g'; gcra, one string holding the TAT in
// '%.17g'. A check id is a random 64-bit prefix drawn when the Store is
// created plus a per-Store counter, so members never collide within a
// Store and collide across Stores only if two random prefixes are equal
// (probability 2^-64 per pair) and their counters meet in one key at the
// same µs.
//
// # Expiry
//
// Every key written gets its TTL in the same script call, in milliseconds:
// ceil(ResetAfter / 1 ms), the time until the usage it holds has fallen to
// zero (for decay, below 0.01), at least 1 ms. With the Redis clock the
// key therefore disappears exactly when its state no longer matters. With
// Options.Now the TTL is padded by ClockPadding (default 10 s), since the
// caller's clock and Redis's expiry clock may disagree. Peeks and denied
// checks write nothing and touch no TTL; refunds keep the TTL.
//
// # Cluster: checks across slots
//
// Hits are grouped by the hash slot of their tag; the hits of one slot are
// decided by one atomic script. Hits sharing a key (in any zones) or a
// Group are always in one slot, so such checks are fully atomic. A check
// whose hits span k slots runs k scripts concurrently; it is allowed only
// if every slot allowed. If any slot denies (or fails), the slots that
// recorded the cost are refunded by refund.lua, one more round trip. What
// that guarantees:
//
//   - an allowed check recorded its cost on every hit, once;
//   - a denied check leaves nothing recorded once its refunds have run;
//   - no check is admitted that a single atomic script would have denied
//     because of a refund (a refund only lowers usage back to what it
//     was), with one exception: for gcra, a check on the same key that runs
//     between the record and the refund may leave the TAT earlier by the
//     time between the two calls, admitting at most that time's worth of
//     extra cost (one round trip divided by Window/Rate);
//   - between the record and the refund (about one round trip), other
//     checks see the cost and may be denied when they would have passed.
//
// A refund that fails is logged (Options.Logger) and the decision stands:
// the cost stays recorded until the keys expire, which makes limiting
// stricter, never looser. A window or bucket that has already left the
// state when the refund runs is not refunded (nothing of it counts any
// more); in the pathological case of a clock behind a buckets state by more
// than a window, the cost recorded into the oldest kept bucket is not
// refunded.
//
// Peeks (cost 0) write nothing and need no refund. Multi-slot checks are
// uncommon: give the hits a Group, or the same key, to make them one slot.
//
// # Errors
//
// Check and Reset validate before any round trip (errors wrap
// sluice.ErrInvalid). Every call is bounded by Options.Timeout (default
// 50 ms). If the caller's context is done, its error is returned.
// Otherwise every failure to obtain a decoded answer wraps
// sluice.ErrUnavailable: no connection, the timeout, and also error replies
// (LOADING, READONLY, CLUSTERDOWN, MASTERDOWN, OOM, a key of the wrong type
// under the prefix...), because for each of them the store could not
// decide and the caller's failure policy should apply. The Redis message is
// kept in the error for logs.
package redisstore
