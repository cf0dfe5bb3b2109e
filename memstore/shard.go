package memstore

import (
	"math"
	"sync"

	"github.com/sluicehq/sluice/internal/algo"
)

// Sweeping and eviction. Go map iteration starts at a random position, so
// ranging over a few entries samples the map.
const (
	sweepEvery  = 64   // checks on a shard between two sweeps
	sweepScan   = 8    // entries a sweep examines
	evictSample = 8    // entries examined to choose what to drop at the bound
	shrinkRatio = 4    // rebuild a map once it holds under 1/shrinkRatio of its peak...
	shrinkMin   = 1024 // ...if that peak was at least this many entries
)

// entry is one stored state and the instant from which it is empty.
type entry struct {
	state   algo.State
	expires int64 // µs since the epoch: the last Record's now + ResetAfter
}

// shard is one independently locked map of states.
type shard struct {
	mu   sync.Mutex
	m    map[stateKey]*entry
	max  int    // entries the shard may hold
	peak int    // largest len(m) since the map was built
	ops  uint32 // checks since the last sweep
	_    [64]byte
}

func (sh *shard) init(max int) {
	sh.m = make(map[stateKey]*entry)
	sh.max = max
}

// tick counts one check on the shard and sweeps every sweepEvery checks.
// It returns the number of expired states dropped. sh.mu must be held.
func (sh *shard) tick(now int64) int {
	sh.ops++
	if sh.ops < sweepEvery {
		return 0
	}
	sh.ops = 0
	dropped := 0
	n := sweepScan
	for k, e := range sh.m {
		if e.expires <= now {
			delete(sh.m, k)
			dropped++
		}
		if n--; n == 0 {
			break
		}
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
	m := make(map[stateKey]*entry, len(sh.m))
	for k, e := range sh.m {
		m[k] = e
	}
	sh.m, sh.peak = m, len(m)
}

// insert adds a new state, making room first when the shard is full. It
// reports whether a live state was evicted and how many expired ones were
// dropped. sh.mu must be held.
func (sh *shard) insert(k stateKey, e *entry, now int64) (evicted bool, expired int) {
	if len(sh.m) >= sh.max {
		evicted, expired = sh.makeRoom(now)
	}
	sh.m[k] = e
	sh.peak = max(sh.peak, len(sh.m))
	return evicted, expired
}

// makeRoom examines evictSample entries: it drops the expired ones, or if
// there are none, the one whose reset deadline comes first (the state that
// would have been forgotten soonest anyway).
func (sh *shard) makeRoom(now int64) (evicted bool, expired int) {
	var victim stateKey
	soonest := int64(math.MaxInt64)
	n := evictSample
	for k, e := range sh.m {
		switch {
		case e.expires <= now:
			delete(sh.m, k)
			expired++
		case e.expires < soonest:
			victim, soonest = k, e.expires
		}
		if n--; n == 0 {
			break
		}
	}
	if expired == 0 && soonest != math.MaxInt64 {
		delete(sh.m, victim)
		evicted = true
	}
	return evicted, expired
}
