// Package memstore is sluice's embedded store: a sluice.Limiter that keeps
// every state in process memory. It is the default when no Redis is
// configured, the fallback of the "local" failure policy, and the reference
// the conformance suite (internal/storetest) runs first.
//
// # Concurrency
//
// States live in Options.Shards hash tables, each behind its own mutex; a
// state's shard is chosen by a seeded hash of its group, zone and key, so
// every limit of one key shares a shard and a multi-limit check on one key
// takes one lock. A check locks the distinct shards of its hits in ascending order (never
// two checks waiting on each other in a cycle), evaluates every hit with
// internal/algo.Decide and records only if the whole check is allowed. A
// check is therefore atomic with respect to every other check and reset,
// and there is no global lock: checks on different shards never wait for
// each other. Each shard's lock is a sync.Mutex, alone with the fields a
// check touches on one cache line of its own.
//
// A single-hit check that records nothing (a denial that is not shadow,
// or a cost of 0) on a sliding-window, GCRA or decay state is decided
// without any lock: it reads the shard's table and the state's entry as a
// sequence lock's reader (a counter beside the table and one in each
// entry, changed by every holder of the lock) and evaluates a copy of the
// state; if anything it read changed meanwhile, or the state would allow a
// recording check, it goes on as any other check. Its decision is the one
// the locked path would make at the instant of its reads
// (TestPeekIsLocked, TestLockFreeMatchesLocked), so a check stays atomic
// with respect to every other; a hot key far over its limit is denied
// with no write to shared memory. Every word read without a lock is
// loaded, and written, with sync/atomic: the sequence locks hold under
// Go's memory model on every architecture, and the race detector sees
// these paths as they run.
//
// Each state also has a lock of its own (the entry's counter, taken by
// compare-and-swap), held by every check that evaluates or changes it. A
// single-hit check on a state already stored, found as above, records
// (and a log's or buckets' check is decided) under that lock alone: it
// writes the state's entry and nothing of the shard, so checks on two
// cores do not move a shard's lock between them. Changing the table (a
// new state, a removal) still takes the shard's lock; a state leaves its
// table only with its own lock held, for good, so the lock of a state
// found in the table proves it is still there.
//
// # Lookups and allocation
//
// A state's identity is internal/ident's State, the one every store
// shares: the check's Group, zone, key, algorithm, window and bucket
// length (Group is part of it, as in redisstore). A shard is an
// open-addressing table (linear probing, at most 7/8 full) whose slots hold
// a seeded 64-bit hash of the identity beside a pointer to the state's
// entry, and each entry keeps its full identity: a lookup compares hashes
// in the slot array and then the identity of the one entry whose hash
// matches, so states whose hashes collide are told apart, a collision costs
// time, never correctness, and the seed keeps clients from choosing
// colliding keys. Each algorithm's state lives in the same allocation as
// its entry, and so do group, zone and key when together they fit in 32
// bytes (addresses, user and token IDs): a lookup touches the slot array
// and one object. Up to 64 bytes they are kept whole in a string of their
// own; longer, as their SHA-256 digest (computed on the stack), so that a
// state's size does not depend on its key.
//
// A single-hit check, the common case, takes a path of its own: one pass
// that validates it (accepting only what sluice.Check.Validate accepts, and
// leaving anything else to Validate) and finds its algorithm, one hash of
// group, zone and key, one clock read, one lock, and the state's fused
// Check called directly.
//
// A check of several hits works in fixed arrays of sluice.MaxHits elements
// on the stack. Every check hashes the caller's strings in place. Checking a key that already has
// state allocates nothing when the Decision passed in is reused (the log
// algorithm's event slice aside, which grows to the rate and is then
// reused). A new key costs its entry, plus one copy of its zone and key
// when they are 33 to 64 bytes long: the store never pins the caller's
// buffers.
//
// # Expiry of idle state
//
// Each recorded check learns from its algorithm when the state will be
// empty again (its ResetAfter); the state's deadline is the latest such
// instant. Past the deadline the state is equivalent to no state and may be
// dropped. The store has no janitor goroutine and nothing to close: every
// 64th check on a shard examines 8 states of that shard's table and drops
// the expired ones, going on 8 states at a time (up to 64 states, and 256
// slots) while every state it met had expired, as after a flood of
// one-off keys. Each sweep starts where the shard's previous one stopped,
// so sweeps visit the whole table in turn. Denials decided without the
// lock (above) do not count towards a sweep; of the checks that record
// under a state's own lock, one in 64 (picked by the state's lock count and
// hash) takes the shard's lock and counts for 64, so the 64th is an
// average. A sweep passes over states a check is holding. While sweeps find nothing
// expired (every state live, as in a busy store), each sweep comes twice as
// many checks after the last, up to every 1,024th check; the first sweep
// that drops a state brings the shard back to every 64th. A table less than 1/8 full is
// rebuilt half full, so it gives back the memory of a flood that has
// expired. Expired states not yet swept are harmless (the algorithms read
// them as empty) and count toward the bound. A store that receives no checks at all frees
// nothing, but holds at most MaxKeys states.
//
// # The bound on keys
//
// The store never holds more than Options.MaxKeys states (default
// 1,000,000): each of the S shards holds at most MaxKeys/S. Only a check
// that is allowed with a cost above zero stores new state; peeks, denials
// and resets never grow the store, so hammering random keys with denied or
// zero-cost checks costs no memory. When a new state must go into a full
// shard, the store examines 8 states of the shard's table from a slot
// picked by the new state's seeded hash (so clients cannot aim at it): it
// drops those that have expired, and if none has,
// it evicts the one whose reset deadline comes first: a small sample
// approximating "the state that would have been forgotten soonest anyway".
// Stats reports evictions and expirations.
//
// An evicted key starts again from empty: eviction errs toward admitting,
// never toward denying. A flood of distinct keys larger than MaxKeys can
// therefore let a real client through early; size MaxKeys above the working
// set (the number of keys active within one window) and watch
// Stats().Evictions, which stays at zero while the bound is not reached.
//
// # Memory per key
//
// Measured on amd64 (Go 1.26) with 16-byte keys, one limit per key, one
// recorded check, the key bytes and the table's own overhead included
// (TestMemoryPerKey in store_test.go, reported in docs/memstore.md): about
// 105 bytes per gcra, decay or sliding-window state, 216 per buckets state
// with the default 10 buckets (8 more bytes per extra bucket) and 104 per
// log state holding one event, plus about 8 bytes per further
// distinct recording instant in its window, up to Rate of them (16 once its
// events span more than 2^44 µs, about 203 days). A zone and
// key of 33 to 64 bytes together add their length; a longer pair nothing,
// being kept as its digest. Whatever the key, a sliding-window state holds
// at most 256 bytes (TestMemoryBoundLongKeys, TestMemoryPerKeyLength), so
// the default bound of 1,000,000 states caps the store at 256 MB; see
// docs/memstore.md.
//
// # Time
//
// Time is read once per check and truncated to microseconds, the unit of
// internal/algo. Without Options.Now the store reads the system clock with
// time.Now at most once a second and in between adds the time elapsed on
// Go's monotonic clock: one clock read per check instead of time.Now's two,
// which is a large share of a check on virtual machines. The reading
// follows a step of the system clock within a second. Right after a
// machine resumes from suspend (when the monotonic clock stood still) it may
// lag for up to a second. A clock that steps backwards, this one or an
// Options.Now, breaks nothing and a state's deadline only moves later, but
// what a check at an instant older than the state sees is each algorithm's
// own (internal/algo): log, decay and gcra keep counting everything
// recorded; buckets keep it but do not count buckets newer than now until
// the clock catches up; sliding-window reads an instant before its window
// as that window's start, so it forgets nothing and errs towards denying.
//
// # Validation
//
// Check and Reset validate their input as sluice.Check.Validate does (a
// single-hit check of a common shape is accepted by an equivalent one-pass
// test, TestCommonOneIsValid); errors wrap sluice.ErrInvalid. A context that is already done is returned as an error (wrapping ctx.Err()) before anything
// is decided; a Check never blocks on anything but the shard locks.
package memstore
