package edge

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// ways is the number of slots a fingerprint may occupy: the table is
// set-associative, a fingerprint's set being picked by its low bits.
const ways = 8

// A denial is one stored denial. It holds no string of its check: only the
// check's fingerprint, a digest of each hit's zone and key (for Reset) and
// the decision's fixed-size results. Published by an atomic pointer store
// and never changed afterwards, except for ref.
type denial struct {
	fp        fingerprint
	at, until int64       // nanoseconds since the cache's base: when the check was sent; when it may pass
	ref       atomic.Bool // used since the clock hand last passed (second chance)
	hits      []deniedHit
}

// deniedHit is one hit of a stored denial.
type deniedHit struct {
	key    uint64        // digest of the hit's zone and key
	hold   time.Duration // how long after at the hit's denial may be repeated
	result sluice.HitResult
}

// Sizes counted against DenyCacheOptions.MaxBytes.
const (
	slotBytes   = int64(unsafe.Sizeof(atomic.Pointer[denial]{}))
	denialBytes = int64(unsafe.Sizeof(denial{}))
	hitBytes    = int64(unsafe.Sizeof(deniedHit{}))
)

// bytesOf returns the heap bytes of a denial of n hits, rounded up to the
// allocator's 16-byte granule.
func bytesOf(n int) int64 {
	round := func(b int64) int64 { return (b + 15) &^ 15 }
	return round(denialBytes) + round(int64(n)*hitBytes)
}

// lookup returns the denial stored under fp, or nil. It takes no lock and
// allocates nothing: a few atomic loads of the fingerprint's set.
func (dc *DenyCache) lookup(fp fingerprint) *denial {
	set := dc.slots[(fp.lo&dc.setMask)*ways:][:ways]
	for i := range set {
		if e := set[i].Load(); e != nil && e.fp == fp {
			return e
		}
	}
	return nil
}

// replay writes the stored denial e to d as seen at now: the waits are
// shortened by the time since, and a hit whose wait has passed now allows.
// It reports false if no hit's denial may be repeated any more (see hold).
func (e *denial) replay(now int64, d *sluice.Decision) bool {
	elapsed := time.Duration(now - e.at)
	d.Prepare(len(e.hits))
	for i := range e.hits {
		h := &e.hits[i]
		r := h.result
		held := !r.Allowed && elapsed < h.hold
		r.RetryAfter = max(0, r.RetryAfter-elapsed)
		r.ResetAfter = max(0, r.ResetAfter-elapsed)
		if !held {
			r.Allowed, r.RetryAfter = true, 0
		}
		d.Hits[i] = r
	}
	d.Conclude(sluice.FromDenyCache)
	_, denied := d.Denier()
	return denied
}

// insert stores e, unless a reset has finished since gen was read. It takes
// the cache's lock: inserts follow a store call, which costs far more.
func (dc *DenyCache) insert(e *denial, gen uint64, now int64) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	if dc.gen.Load() != gen {
		return
	}
	size := bytesOf(len(e.hits))
	i := dc.victim(e.fp, now)
	if old := dc.slots[i].Load(); old != nil {
		dc.drop(i, old.fp != e.fp && now < old.until)
	}
	// Make room in bytes: sweep the clock hand over the whole table,
	// dropping expired entries and those not used since it last passed.
	for n := 0; dc.bytes.Load()+size > dc.budget; n++ {
		if n >= 2*len(dc.slots) {
			dc.unstored.Add(1) // cannot happen while budget holds a denial
			return
		}
		j := dc.hand
		dc.hand = (dc.hand + 1) & (len(dc.slots) - 1)
		old := dc.slots[j].Load()
		switch {
		case old == nil:
		case now >= old.until:
			dc.drop(j, false)
		case old.ref.Load():
			old.ref.Store(false)
		default:
			dc.drop(j, true)
		}
	}
	dc.slots[i].Store(e)
	dc.entries.Add(1)
	dc.bytes.Add(size)
	dc.stored.Add(1)
}

// victim returns the slot of fp's set to store it in: the one already
// holding fp, an empty one, an expired one, or else the first not used
// since the set's hand last passed (second chance).
func (dc *DenyCache) victim(fp fingerprint, now int64) int {
	set := int(fp.lo&dc.setMask) * ways
	free := -1
	for i := set; i < set+ways; i++ {
		e := dc.slots[i].Load()
		switch {
		case e != nil && e.fp == fp:
			return i
		case free < 0 && (e == nil || now >= e.until):
			free = i
		}
	}
	if free >= 0 {
		return free
	}
	h := &dc.setHands[set/ways]
	for {
		i := set + int(*h)
		*h = (*h + 1) % ways
		if e := dc.slots[i].Load(); !e.ref.Load() {
			return i
		} else {
			e.ref.Store(false)
		}
	}
}

// drop empties slot i; evicted says whether a denial still in force was
// forgotten early.
func (dc *DenyCache) drop(i int, evicted bool) {
	e := dc.slots[i].Swap(nil)
	dc.entries.Add(-1)
	dc.bytes.Add(-bytesOf(len(e.hits)))
	if evicted {
		dc.evicted.Add(1)
	}
}

// purge drops every denial with a hit whose zone and key digest is one of
// keys.
func (dc *DenyCache) purge(keys []uint64) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	for i := range dc.slots {
		if e := dc.slots[i].Load(); e != nil && e.sharesKey(keys) {
			dc.drop(i, false)
		}
	}
}

func (e *denial) sharesKey(keys []uint64) bool {
	for i := range e.hits {
		for _, k := range keys {
			if e.hits[i].key == k {
				return true
			}
		}
	}
	return false
}
