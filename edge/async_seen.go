package edge

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// A seenKey is an entry's fingerprint and the time of its view (ns since
// base; 0: free): what a lookup or an insertion reads of each way of a
// set, three cache lines per set.
type seenKey struct {
	fp fingerprint
	at int64
}

// A seenView is the store's answer about a key that has no slot: what a
// slot's view would hold (see slot.setView and Async.setView), and the
// parts of the limit and check the fingerprint leaves out (see
// slot.sameLimit), so that the key's next check decides from it exactly
// as from a slot made by the answer. No pointers: the collector never
// scans the table.
type seenView struct {
	remaining               int64
	used                    float64
	retryAfter, resetAfter  time.Duration
	deniedCost, deniedUntil int64
	rate                    int64
	resolution              time.Duration
	shadow, limitShadow     bool
}

// seenShard is one shard of the table of keys seen: a set-associative
// array (ways per set) of keys, and beside it their views, so that a
// lookup reads the set's keys and one view.
type seenShard struct {
	mu    sync.Mutex
	keys  []seenKey
	views []seenView
	mask  uint64 // sets - 1
	// made counts the slots made from the shard's entries (promote), the
	// only way a slot is made while the table is in use: an answer about
	// a key that had no slot when made had not changed finds none (see
	// seeAnswer).
	made atomic.Uint64
	_    [8]byte // no false sharing with the next shard's lock
}

// seenTable remembers, without a slot, the store's last answer about keys
// checked by the store once (with FirstSight 0): a key's next check makes
// the slot from it (Async.promote). A key checked once then costs an entry
// of seenEntryBytes of a table allocated once, and no heap object, map
// entry or string copy for the collector to mark and sweep.
type seenTable struct {
	shards [asyncShards]seenShard
	bytes  int64 // the table's size, counted against MaxBytes
}

// seenEntryBytes is what the table holds per entry.
const seenEntryBytes = int64(unsafe.Sizeof(seenKey{}) + unsafe.Sizeof(seenView{}))

// pageSeen is fewer entries than a 4 KiB page holds, of either array.
const pageSeen = 4096 / int(max(unsafe.Sizeof(seenKey{}), unsafe.Sizeof(seenView{})))

// seenShare is the share of MaxBytes the table may take: at most a
// quarter.
const seenShare = 4

// newSeenTable returns a table of at least keys entries (whole sets of
// ways per shard, a power of two), fewer if that would take more than
// maxBytes/seenShare; nil if even one set per shard would.
func newSeenTable(keys, maxBytes int64) *seenTable {
	perSet := ways * asyncShards * seenEntryBytes
	if perSet > maxBytes/seenShare {
		return nil
	}
	sets := int64(1)
	for sets*ways*asyncShards < keys && 2*sets*perSet <= maxBytes/seenShare {
		sets <<= 1
	}
	t := &seenTable{bytes: sets * perSet}
	for i := range t.shards {
		t.shards[i].keys = make([]seenKey, sets*ways)
		t.shards[i].views = make([]seenView, sets*ways)
		t.shards[i].mask = uint64(sets - 1)
		// Touched now, a page at a time, as the first-sight table is: the
		// table is resident from the start, and a check never pays for
		// faulting in its page.
		for j := 0; j < len(t.shards[i].keys); j += pageSeen {
			t.shards[i].keys[j].at = 0
			t.shards[i].views[j].rate = 0
		}
	}
	return t
}

func (t *seenTable) shard(fp fingerprint) *seenShard {
	return &t.shards[fp.hi%asyncShards]
}

// find returns the index of fp's entry whose view is usable at now (no
// older than maxAge), or -1. The shard is locked.
func (sh *seenShard) find(fp fingerprint, now int64, maxAge time.Duration) int {
	base := int(fp.lo&sh.mask) * ways
	for i := base; i < base+ways; i++ {
		if k := &sh.keys[i]; k.fp == fp {
			if k.at != 0 && time.Duration(now-k.at) <= maxAge {
				return i
			}
			return -1
		}
	}
	return -1
}

// put takes r, the store's answer about hit i of c at now, as the view of
// fp's entry, replacing a view of an earlier time (a later answer is kept,
// as a slot keeps it), or the set's oldest entry. The shard is locked.
func (sh *seenShard) put(fp fingerprint, c *sluice.Check, i int, r *sluice.HitResult, now int64) {
	base := int(fp.lo&sh.mask) * ways
	j := -1
	for x := base; x < base+ways; x++ {
		if sh.keys[x].fp == fp {
			j = x
			break
		}
		if j < 0 || sh.keys[x].at < sh.keys[j].at {
			j = x // free (at 0), or the oldest so far
		}
	}
	k := &sh.keys[j]
	if k.fp == fp && now < k.at {
		return // a later answer is already the view
	}
	l := &c.Hits[i].Limit
	*k = seenKey{fp: fp, at: now}
	v := &sh.views[j]
	*v = seenView{
		remaining: r.Remaining, used: r.Used, retryAfter: r.RetryAfter, resetAfter: r.ResetAfter,
		rate: l.Rate, resolution: l.Resolution, shadow: c.Shadow, limitShadow: l.Shadow,
	}
	if !r.Allowed && !r.Shadow {
		v.deniedCost, v.deniedUntil = c.Cost, now+int64(hold(*l, r.RetryAfter))
	}
}

// forget frees fp's entry (after a reset, or once its key has a slot).
// The shard is locked.
func (sh *seenShard) forget(fp fingerprint) {
	base := int(fp.lo&sh.mask) * ways
	for i := base; i < base+ways; i++ {
		if sh.keys[i].fp == fp {
			sh.keys[i] = seenKey{}
		}
	}
}

// sameLimit reports whether v was answered for k's limit and shadow flag
// (the rest of them is in the fingerprint).
func (v *seenView) sameLimit(k *slotKey) bool {
	l := &k.hit.Limit
	return v.rate == l.Rate && v.resolution == l.Resolution && v.limitShadow == l.Shadow && v.shadow == k.shadow
}

// promote returns a slot for k, whose fingerprint is fp, made from the
// store's answer the seen table holds of it, or nil when it holds none
// (usable, for k's limit) or the table of slots is full (counted as an
// overflow: the check goes to the store). The entry is freed: the slot
// has the view now, and later answers go to it.
//
// Making the slot under the shard's lock, as an answer is written under
// it (seeAnswer), orders the two: an answer either is in the entry before
// the slot copies it, or finds the slot.
func (a *Async) promote(k *slotKey, fp fingerprint, now int64) *slot {
	sh := a.seen.shard(fp)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := sh.find(fp, now, a.maxViewAge)
	if i < 0 || !sh.views[i].sameLimit(k) {
		return nil
	}
	s := a.addSlot(k, fp)
	if s == nil {
		a.overflow.Add(1)
		return nil
	}
	v, at := sh.views[i], sh.keys[i].at
	sh.keys[i] = seenKey{}
	sh.made.Add(1)
	s.mu.Lock()
	if s.viewAt == 0 && !s.dead {
		s.key = *k
		s.remaining, s.used = v.remaining, v.used
		s.retryAfter, s.resetAfter = v.retryAfter, v.resetAfter
		s.viewAt, s.blind, s.fromRecord = at, false, false
		s.deniedCost, s.deniedUntil = v.deniedCost, v.deniedUntil
	}
	s.lastUse = max(s.lastUse, now)
	s.mu.Unlock()
	return s
}

// seeAnswer takes r, the store's answer about hit i of c at now, as the
// view of its key: of its slot if it has one, else of its entry in the
// seen table (no slot is made: see promote). made is the count of slots
// made from fp's shard read before the check found fp had no slot: while
// it is unchanged, fp still has none, and the slots are not looked up.
func (a *Async) seeAnswer(c *sluice.Check, i int, fp fingerprint, made uint64, r *sluice.HitResult, now int64) {
	sh := a.seen.shard(fp)
	sh.mu.Lock()
	if sh.made.Load() != made {
		if s := a.slot(fp); s != nil {
			sh.mu.Unlock()
			s.mu.Lock()
			a.setView(s, c, i, r, now)
			s.mu.Unlock()
			return
		}
	}
	sh.put(fp, c, i, r, now)
	sh.mu.Unlock()
}

// forgetSeen frees the seen table's entry of fp.
func (a *Async) forgetSeen(fp fingerprint) {
	sh := a.seen.shard(fp)
	sh.mu.Lock()
	sh.forget(fp)
	sh.mu.Unlock()
}
