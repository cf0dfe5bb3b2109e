package memstore

import (
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// Sweeping, eviction and the table's size.
const (
	sweepEvery  = 64 // checks on a shard between two sweeps...
	maxIdle     = 4  // ...doubled after each sweep that dropped nothing, up to 64<<4 = 1024
	sweepScan   = 8  // states a sweep examines...
	sweepMax    = 64 // ...and at most this many while all have expired
	sweepSlots  = 4 * sweepMax
	evictSample = 8 // states examined to choose what to drop at the bound
	minSlots    = 8 // the smallest table
	// A table grows when it would be more than 7/8 full and shrinks when
	// it is less than 1/8 full, to half full.
	growNum, growDen = 7, 8
	shrinkDen        = 8
)

// shard is one independently locked table of states: open addressing with
// linear probing over slots that hold a state's seeded 64-bit hash beside
// its entry, so a lookup compares hashes in the slot array and touches one
// entry, the one whose identity it then compares. Equal hashes are told
// apart by the entries' identities; deletion shifts the following entries
// back, so the table has no tombstones.
type shard struct {
	// The header's first cache line holds what a check under the lock
	// writes, the second what peek reads, which changes only with the
	// table's shape. A shard is 128 bytes and a slice of them starts at a
	// multiple of 128 bytes, or 8 bytes past one (the allocator's header
	// of larger objects with pointers), so each group lies in a line of
	// its own (TestShardLayout): a check on another core moves one line
	// of the header, never a neighbour's, and checks on every core share
	// the second line. The lock is a plain mutex: a check takes it
	// exclusively, and sync.Mutex's exclusive lock costs half of
	// sync.RWMutex's.
	mu     sync.Mutex
	cursor uint32 // where the next sweep starts
	n      int32  // entries
	max    int32  // entries the shard may hold
	ops    uint16 // checks since the last sweep (tick), at most sweepEvery<<maxIdle
	idle   uint8  // sweeps in a row that dropped nothing, up to maxIdle
	// scratch holds the copies of the states a multi-hit check decides
	// in this shard (see workset.load), made on the first such check:
	// the check holds the shard's lock, and a copy on the check's stack
	// would move the whole workset to the heap (algo.Decide's states are
	// interfaces).
	scratch *[sluice.MaxHits]words
	_       [64 - 32]byte
	// seq is a sequence lock on the table for peek: made odd (changing)
	// before mu's holder first changes a slot or replaces slots, even
	// again when it unlocks. A reader trusts what it read of the table
	// only if seq was the same even number before and after. seq, tab
	// and mask are written atomically, as are the slots' words while
	// the table is visible to readers.
	seq   uint64
	tab   unsafe.Pointer // &slots[0], for peek
	mask  uint64         // len(slots)-1, for peek
	slots []slot         // a power of two of them; read under mu
	_     [64 - 48]byte
}

// lock locks the shard.
func (sh *shard) lock() {
	sh.mu.Lock()
}

// changing marks the table as changing, before a slot changes or slots
// is replaced. sh.mu must be held.
func (sh *shard) changing() {
	if sh.seq&1 == 0 {
		atomic.StoreUint64(&sh.seq, sh.seq+1)
	}
}

// unlock ends a change of the table, if any, then unlocks mu.
func (sh *shard) unlock() {
	if sh.seq&1 != 0 {
		atomic.StoreUint64(&sh.seq, sh.seq+1)
	}
	sh.mu.Unlock()
}

// setSlots makes slots the table, for the locked path and for peek.
// sh.mu must be held and the table marked changing, or sh not yet shared.
func (sh *shard) setSlots(slots []slot) {
	sh.slots = slots
	atomic.StorePointer(&sh.tab, unsafe.Pointer(&slots[0]))
	atomic.StoreUint64(&sh.mask, uint64(len(slots)-1))
}

// table returns the table as peek reads it, without the lock: valid only
// if sh.seq was the same even number before and after.
func (sh *shard) table() (tab *slot, mask uint64) {
	return (*slot)(atomic.LoadPointer(&sh.tab)), atomic.LoadUint64(&sh.mask)
}

// slot is one place of a shard's table; e is nil when it is empty. A slot
// of a table readers can see changes only through set.
type slot struct {
	hash uint64
	e    *entry
}

// set stores h and e in s, atomically: peek may be reading s.
func (s *slot) set(h uint64, e *entry) {
	atomic.StoreUint64(&s.hash, h)
	atomic.StorePointer((*unsafe.Pointer)(unsafe.Pointer(&s.e)), unsafe.Pointer(e))
}

// entry reads s's entry without the shard's lock.
func (s *slot) entry() *entry {
	return (*entry)(atomic.LoadPointer((*unsafe.Pointer)(unsafe.Pointer(&s.e))))
}

// init sets up an empty table holding at most max entries, or
// math.MaxInt32 if max is larger (a shard would need hundreds of GB to
// reach that).
func (sh *shard) init(max int) {
	sh.setSlots(make([]slot, minSlots))
	sh.max = int32(min(max, math.MaxInt32))
}

// find returns the entry of k, or nil. sh.mu must be held.
func (sh *shard) find(h uint64, k *stateKey) *entry {
	mask := uint64(len(sh.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &sh.slots[i]
		if s.e == nil {
			return nil
		}
		if s.hash == h && s.e.is(k) {
			return s.e
		}
	}
}

// remove deletes e, stored under h. sh.mu and e's lock must be held; e's
// lock is never released (see entry.tryLock).
func (sh *shard) remove(h uint64, e *entry) {
	mask := uint64(len(sh.slots) - 1)
	for i := h & mask; sh.slots[i].e != nil; i = (i + 1) & mask {
		if sh.slots[i].e == e {
			sh.removeAt(i)
			return
		}
	}
}

// removeAt empties slot i and moves back the entries after it that would
// otherwise no longer be found from their home slot. sh.mu and the lock of
// slot i's entry must be held; the entry's is never released.
func (sh *shard) removeAt(i uint64) {
	sh.changing()
	mask := uint64(len(sh.slots) - 1)
	sh.n--
	for j := i; ; {
		j = (j + 1) & mask
		s := sh.slots[j]
		if s.e == nil {
			sh.slots[i].set(0, nil)
			return
		}
		// s may fill the hole at i unless its home slot lies
		// cyclically in (i, j].
		home := s.hash & mask
		if i <= j && i < home && home <= j || i > j && (i < home || home <= j) {
			continue
		}
		sh.slots[i].set(s.hash, s.e)
		i = j
	}
}

// sweep runs every sweepEvery checks on the shard, or up to 16 times as
// seldom while sweeps find nothing expired (see Store.tick):
// from where the last sweep stopped it examines sweepScan states, and
// goes on by sweepScan more, up to sweepMax, while every state it met had
// expired (as after a flood of one-off keys), never visiting more than
// sweepSlots slots. A table left mostly empty is then rebuilt smaller. It
// returns the number of expired states dropped. sh.mu must be held.
func (sh *shard) sweep(now int64) int {
	mask := uint32(len(sh.slots) - 1)
	dropped, met, budget := 0, 0, sweepScan
	for range min(sweepSlots, len(sh.slots)) {
		i := sh.cursor & mask
		e := sh.slots[i].e
		if e == nil {
			sh.cursor++
			continue
		}
		met++
		if sh.expired(e, now) {
			// The slot now holds the entry shifted back into it, if any:
			// it is examined next.
			sh.removeAt(uint64(i))
			dropped++
		} else {
			sh.cursor++
		}
		if budget--; budget > 0 {
			continue
		}
		if dropped < met || met >= sweepMax {
			break
		}
		budget = sweepScan
	}
	if len(sh.slots) > minSlots && int(sh.n)*shrinkDen < len(sh.slots) {
		sh.resize(max(minSlots, 2*ceilPow2(int(sh.n))))
	}
	return dropped
}

// resize rebuilds the table with n slots (a power of two that holds every
// entry): a table never gives back its memory otherwise.
func (sh *shard) resize(n int) {
	sh.changing()
	slots := make([]slot, n) // filled before readers can see it
	mask := uint64(n - 1)
	for _, s := range sh.slots {
		if s.e == nil {
			continue
		}
		i := s.hash & mask
		for slots[i].e != nil {
			i = (i + 1) & mask
		}
		slots[i] = s
	}
	sh.setSlots(slots)
	sh.cursor = 0
}

// insert adds a new entry under h, making room first when the shard is
// full. It reports whether a live state was evicted and how many expired
// ones were dropped. sh.mu must be held.
func (sh *shard) insert(h uint64, e *entry, now int64) (evicted bool, expired int) {
	if sh.n >= sh.max {
		evicted, expired = sh.makeRoom(h, now)
	}
	if int(sh.n+1)*growDen > len(sh.slots)*growNum {
		sh.resize(2 * len(sh.slots))
	}
	sh.changing()
	mask := uint64(len(sh.slots) - 1)
	i := h & mask
	for sh.slots[i].e != nil {
		i = (i + 1) & mask
	}
	sh.slots[i].set(h, e)
	sh.n++
	return evicted, expired
}

// makeRoom examines evictSample states from a slot chosen by the
// (seeded, so unpredictable) hash h of the state about to be inserted: it
// drops those that have expired, or if none has, the one whose reset
// deadline comes first (the state that would have been forgotten soonest
// anyway).
func (sh *shard) makeRoom(h uint64, now int64) (evicted bool, expired int) {
	var sample [evictSample]slot
	n := 0
	mask := uint64(len(sh.slots) - 1)
	for i, seen := (h>>32)&mask, 0; n < evictSample && seen < len(sh.slots); i, seen = (i+1)&mask, seen+1 {
		if s := sh.slots[i]; s.e != nil {
			sample[n] = s
			n++
		}
	}
	victim, soonest := -1, int64(math.MaxInt64)
	for j, s := range sample[:n] {
		if sh.expired(s.e, now) {
			sh.remove(s.hash, s.e)
			expired++
		} else if t := atomic.LoadInt64(&s.e.expires); t < soonest {
			victim, soonest = j, t
		}
	}
	if expired == 0 && victim >= 0 {
		v := sample[victim]
		v.e.lock()
		sh.remove(v.hash, v.e)
		evicted = true
	}
	return evicted, expired
}

// expired reports whether e's deadline has passed at now and, if so,
// holds e's lock for its removal. An entry whose lock a check holds is
// not expired: that check may be recording on it. sh.mu must be held.
func (sh *shard) expired(e *entry, now int64) bool {
	if !e.expiredAt(now) || !e.tryLock() {
		return false
	}
	if e.expires <= now {
		return true
	}
	e.unlock(atomic.LoadUint32(&e.seq)&seqDenied != 0) // recorded on since expiredAt read it
	return false
}

// ceilPow2 returns the least power of two >= n (n >= 1).
func ceilPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
