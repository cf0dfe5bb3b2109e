// Package top answers "who is being limited, right now": per zone (and per
// rate-limit-service domain), the keys denied most, the keys that spent
// the most admitted cost, and the keys near a limit, over a sliding
// period, in a memory bound fixed whatever the number of keys.
//
// # Algorithm and error bound
//
// Each list is a Space-Saving summary (Metwally, Agrawal and El Abbadi,
// "Efficient computation of frequent and top-k elements in data streams",
// 2005) of Capacity counters, one summary per bucket of a ring of Buckets
// buckets that together span Period. A key already counted is incremented
// by its weight; a new key takes over a counter with the smallest count,
// adding its weight to that counter's count. Within one bucket of total
// weight N_b a counted key's count exceeds its true weight by at most
// N_b/Capacity, and a key not counted has a true weight of at most
// N_b/Capacity. Summing the buckets of the window, whose total weight is
// N:
//
//   - every reported count is within N/Capacity of the key's true weight
//     in the window (Key.Error is the tighter bound the counters know);
//   - every key whose true weight exceeds N/Capacity is reported.
//
// The window slides by whole buckets: a list covers between
// (Buckets-1)/Buckets of Period and Period.
//
// A Tracker is split into shards, one per processor (P) up to MaxShards,
// each with its own buckets: an observation goes to the shard of the P
// that makes it, and a snapshot sums the shards' buckets as it sums
// buckets, so the bounds above hold with N the total over all of them.
//
// Those bounds are exact below Options.Budget observations a second per
// shard. Beyond it (a flood), a shard observes one check in 2^s, drawn at
// random, counting it 2^s times (s from the rate of the second before,
// raised within a second when the budget runs out; at most 10): the
// bounds then hold for the sampled stream, whose count of a key of true
// weight C differs from C by about sqrt(2^s × C) (one standard deviation),
// a key's streak starts at its first drawn observation, and
// Snapshot.Sampling says 2^s. TestFloodAccuracy tests the sum of both
// errors against an exact count on a Zipf flood. A Limiter draws in two
// steps, with the same probability: first at its Set's floor (the
// smallest shift of its trackers' shards that observed something in the
// current or the previous second, raised by Set.Run on each tick,
// lowered at once), before it looks for the tracker, then the bits left
// in the shard. Idle shards are left out so that a flood observed on
// fewer processors than there are shards raises the floor too
// (TestLimiterFloodFloor, TestSetFloorIdleShards); a shard whose shift
// fell below the floor unseen (for at most a tick), or an idle shard
// until its first check is drawn, is sampled at the floor's rate
// meanwhile, counted as many times.
//
// # Memory
//
// A Tracker holds, per shard, 3 lists × Buckets × Capacity fixed-size
// entries (keys are copied into the entry, up to KeyBytes bytes) with
// their counts, index and the list of the smallest, and a ring of
// per-second counts; Tracker.Bytes states the total. Nothing grows with
// traffic.
//
// # Cost
//
// A Limiter passes a check without Group or Shadow on to the store as a
// literal of its fields, which the compiler writes word by word, rather
// than as it came (copied in 16-byte moves that wait for the caller's
// 8-byte stores: BenchmarkForward). It decides then, from the decision
// alone and without writing anything shared, whether a check is the
// common one (one allowed hit below Near) and, if so, draws whether it
// is sampled, from the runtime's per-thread random state; such a check
// costs no lock and no lookup. Another check of one key (a denial, a
// near-limit check) costs, under a flood, a draw at the set's floor,
// and if drawn a lookup of the zone, the number of the P and a draw of
// the bits left: only then,
// if drawn, one hash of the key, the mutex of the P's shard (uncontended
// but for a snapshot or a goroutine that moved P meanwhile) and O(1) work
// for a key already counted; a key that takes a counter over pops one
// from the set of counters at the smallest count, gathered again by one
// scan of the counts when it runs out. Nothing allocates. Options.Budget
// bounds the observations, and so what tracking costs beyond the draws,
// whatever the rate of denials (BenchmarkLimiter, BenchmarkLimiterRatio;
// docs/server.md gives the measured cost).
//
// Keys are shown as a digest keyed with a secret (Options.DigestKey,
// Tracker.ID) unless the tracker was made with ShowKeys: a key is often
// a credential, and an unkeyed digest of a key from a small set (an IPv4
// address, a numeric user id) gives the key away to anyone who tries
// them all.
package top
