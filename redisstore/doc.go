// Package redisstore is a sluice.Limiter whose state lives in Redis
// (standalone, Sentinel or Cluster) and is changed only by atomic Lua
// scripts, so that every process using the same Redis and Prefix shares
// the same limits. The full description, with measured figures, is
// docs/redis.md; this comment is what a caller needs.
//
//	s, err := redisstore.Dial("redis://localhost:6379", redisstore.Options{})
//	...
//	defer s.Close()
//	d, err := sluice.Allow(ctx, s, ip, limit)
//
// # Constructors
//
// Dial connects to a URL (redis://, rediss://, redis-sentinel://,
// redis-cluster://; see Dial) and Close closes the connection. New takes a
// rueidis client the caller owns; NewWithScripter any client behind the
// Scripter interface (package redisstore/goredis adapts go-redis). Cluster
// mode is always the client's own (rueidis's mode, Scripter.Cluster):
// there is no flag that could disagree with it. Options' zero value is the
// defaults. Dial connects at once: an unreachable Redis is an error
// wrapping sluice.ErrUnavailable.
//
// # Contract
//
// A check is decided by one script call per hash slot (one outside a
// Cluster), atomically and all or nothing, with the same results as
// package memstore: the scripts decide and write, and the Store computes
// Used, Remaining, RetryAfter and ResetAfter from the state they read
// with internal/algo, the code memstore runs. Every key written gets its
// TTL in the same call. The Redis server's TIME is the clock unless
// Options.Now is set. A Group is part of a state's identity (as in every
// store): the hash tag is the Group when set, so all hits of the check
// share one slot. A check whose hits span Cluster slots is decided slot by
// slot and the slots that recorded are refunded when another denied (see
// docs/redis.md for what that guarantees).
//
// Concurrent single-slot checks are coalesced: up to two script calls are
// under way at once per node (the server; in a Cluster, each master), each
// deciding up to Options.MaxBatch queued checks, one after the other, as
// if sent one by one. Options.Timeout bounds each call from when it is
// sent; a call that times out fails the checks queued behind it for the
// same node at once. At most Options.MaxQueue checks wait per node: past
// it a check fails at once with sluice.ErrUnavailable.
//
// # Cluster nodes
//
// In a Cluster the Store keeps a map of the master of every hash slot,
// read with CLUSTER SLOTS (through a Scripter that is a SlotMapper) at
// first use, every 5 s while checks come and every 100 ms after a failed
// call. Store.Part names the master that decides a check, so that an
// edge.Breaker keeps one state per master (edge.BreakerOptions.Parts):
// one master's failure degrades its own keys only.
//
// # Errors
//
// Check and Reset validate before any round trip (errors wrap
// sluice.ErrInvalid). If the caller's context is done, its error is
// returned. A check that failed on what one of its keys holds (a key of
// another type under the prefix) fails alone with sluice.ErrBadState,
// logged with its keys' digests: Redis is healthy. Every other failure to
// obtain a decoded answer wraps sluice.ErrUnavailable (no connection, the
// timeout, a full queue, error replies such as LOADING, READONLY,
// CLUSTERDOWN, OOM): the caller's failure policy applies. Requires Redis 6.2 or
// later (ZMSCORE, SET KEEPTTL).
package redisstore
