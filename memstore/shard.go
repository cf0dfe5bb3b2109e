package memstore

import (
	"math"
	"sync"
)

// Sweeping and eviction. Go map iteration starts at a random position, so
// ranging over a few entries samples the map.
const (
	sweepEvery  = 64   // checks on a shard between two sweeps
	sweepScan   = 8    // map slots a sweep examines...
	sweepMax    = 64   // ...and at most this many states while all have expired
	evictSample = 8    // map slots examined to choose what to drop at the bound
	shrinkRatio = 4    // rebuild a map once it holds under 1/shrinkRatio of its peak...
	shrinkMin   = 1024 // ...if that peak was at least this many entries
)

// shard is one independently locked map of states, keyed by a seeded
// 64-bit hash of their stateKey: a map with small fixed-size keys is faster
// and denser than one keyed by strings, and collisions are chained.
type shard struct {
	mu   sync.Mutex
	m    map[uint64]*entry
	n    int    // entries, chained ones included
	max  int    // entries the shard may hold
	peak int    // largest len(m) since the map was built
	ops  uint32 // checks since the last sweep
	_    [64]byte
}

func (sh *shard) init(max int) {
	sh.m = make(map[uint64]*entry)
	sh.max = max
}

// find returns the entry of k, or nil. sh.mu must be held.
func (sh *shard) find(h uint64, k *stateKey) *entry {
	for e := sh.m[h]; e != nil; e = e.next {
		if e.is(k) {
			return e
		}
	}
	return nil
}

// remove unlinks e from the chain of h. sh.mu must be held.
func (sh *shard) remove(h uint64, e *entry) {
	head := sh.m[h]
	if head == e {
		if e.next == nil {
			delete(sh.m, h)
		} else {
			sh.m[h] = e.next
		}
		sh.n--
		return
	}
	for p := head; p != nil; p = p.next {
		if p.next == e {
			p.next = e.next
			sh.n--
			return
		}
	}
}

// dropExpired removes the expired entries of h's chain and returns how
// many it removed. sh.mu must be held.
func (sh *shard) dropExpired(h uint64, head *entry, now int64) int {
	dropped := 0
	for e := head; e != nil; e = e.next {
		if e.expires <= now {
			sh.remove(h, e)
			dropped++
		}
	}
	return dropped
}

// tick counts one check on the shard and sweeps every sweepEvery checks:
// it examines sweepScan map slots, and goes on by sweepScan more, up to
// sweepMax, while every state it met had expired (as after a flood of
// one-off keys). It returns the number of expired states dropped. sh.mu
// must be held.
func (sh *shard) tick(now int64) int {
	sh.ops++
	if sh.ops < sweepEvery {
		return 0
	}
	sh.ops = 0
	dropped, met, budget := 0, 0, sweepScan
	for h, head := range sh.m {
		for e := head; e != nil; e = e.next {
			met++
		}
		dropped += sh.dropExpired(h, head, now)
		if budget--; budget > 0 {
			continue
		}
		if dropped < met || met >= sweepMax {
			break
		}
		budget = sweepScan
	}
	sh.shrink()
	return dropped
}

// shrink rebuilds the map once most of it has been dropped: a Go map never
// gives back the memory of deleted entries.
func (sh *shard) shrink() {
	if sh.peak < shrinkMin || len(sh.m) >= sh.peak/shrinkRatio {
		return
	}
	m := make(map[uint64]*entry, len(sh.m))
	for h, e := range sh.m {
		m[h] = e
	}
	sh.m, sh.peak = m, len(m)
}

// insert adds a new entry under h, making room first when the shard is
// full. It reports whether a live state was evicted and how many expired
// ones were dropped. sh.mu must be held.
func (sh *shard) insert(h uint64, e *entry, now int64) (evicted bool, expired int) {
	if sh.n >= sh.max {
		evicted, expired = sh.makeRoom(now)
	}
	e.next = sh.m[h]
	sh.m[h] = e
	sh.n++
	sh.peak = max(sh.peak, len(sh.m))
	return evicted, expired
}

// makeRoom examines evictSample map slots: it drops their expired entries,
// or if there are none, the entry whose reset deadline comes first (the
// state that would have been forgotten soonest anyway).
func (sh *shard) makeRoom(now int64) (evicted bool, expired int) {
	var victim *entry
	var victimHash uint64
	soonest := int64(math.MaxInt64)
	n := evictSample
	for h, head := range sh.m {
		expired += sh.dropExpired(h, head, now)
		for e := sh.m[h]; e != nil; e = e.next {
			if e.expires < soonest {
				victim, victimHash, soonest = e, h, e.expires
			}
		}
		if n--; n == 0 {
			break
		}
	}
	if expired == 0 && victim != nil {
		sh.remove(victimHash, victim)
		evicted = true
	}
	return evicted, expired
}
