package edge

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// A seenView is the store's answer about a key that has no slot: what a
// slot's view would hold (see slot.setView and Async.setView), and a
// digest of the parts of the limit and check the fingerprint leaves out
// (see slot.sameLimit), so that the key's next check decides from it as
// from a slot made by the answer. 64 bytes, one cache line; no pointers:
// the collector never scans the table.
type seenView struct {
	at                     int64 // ns since base, the answer's time
	remaining              int64
	used                   float64
	retryAfter, resetAfter time.Duration
	// deniedCost is the cost the store denied, when denied: the denial
	// stands until at + hold(limit, retryAfter), as on a slot.
	deniedCost int64
	denied     bool
	limit      uint64 // limitSum of the limit and shadow flag answered for
}

// seenShard is one shard of the table of keys seen: a set-associative
// array of sets of seenWays entries, each set one cache line of tags (8
// bytes each) and its meta word, and beside them the entries' views, so
// that a lookup reads one line of tags and the one view that matches.
type seenShard struct {
	mu sync.Mutex
	// tags hold, per set, seenWays tags (seenTag of each entry's
	// fingerprint, 0 when free: written under mu, read without it) and
	// the set's meta word: in its low 32 bits the count of slots whose
	// fingerprint falls in the set (added before a slot is in the map,
	// taken after it is out: a check of a key whose set counts none
	// knows it has no slot without reading the map), in its high 32 bits
	// the count of slots made from the set's entries (see seeAnswer).
	tags  []atomic.Uint64
	views []seenView // seenWays per set
	mask  uint64     // sets - 1
	hand  uint64     // rotates over the ways: the next entry a full set loses
	_     [16]byte   // no false sharing with the next shard's lock
}

// seenWays is the entries of a set: 7 tags and the meta word make one
// 64-byte line.
const seenWays = 7

// madeOne is what making a slot from a set adds to its meta word.
const madeOne = 1 << 32

// seenTag is what the table keeps of fp: its high word (fp.lo picks the
// set), never 0. Two keys of one set share a tag with probability 2^-63
// per pair: the table then takes one's answer for the other's, once,
// as a fingerprint collision would (2^-128).
func seenTag(fp fingerprint) uint64 { return fp.hi | 1 }

// seenTable remembers, without a slot, the store's last answer about keys
// checked by the store once (with FirstSight 0): a key's next check makes
// the slot from it (Async.promote). A key checked once then costs an entry
// of a table allocated once (73 bytes: its view and tag, and its share
// of its set's meta word), and no heap object, map entry or string copy
// for the collector to mark and sweep.
type seenTable struct {
	shards [asyncShards]seenShard
	bytes  int64 // the table's size, counted against MaxBytes
}

// seenSetBytes is what the table holds per set: a line of tags and meta
// word, and seenWays views.
const seenSetBytes = int64(8*unsafe.Sizeof(uint64(0)) + seenWays*unsafe.Sizeof(seenView{}))

// pageSeen is the views per 4 KiB page.
const pageSeen = 4096 / int(unsafe.Sizeof(seenView{}))

// seenShare is the share of MaxBytes the table may take: at most a
// quarter.
const seenShare = 4

// newSeenTable returns a table of at least keys entries (whole sets of
// seenWays per shard, a power of two), fewer if that would take more than
// maxBytes/seenShare; nil if even one set per shard would.
func newSeenTable(keys, maxBytes int64) *seenTable {
	perSet := seenSetBytes * asyncShards
	if perSet > maxBytes/seenShare {
		return nil
	}
	sets := int64(1)
	for sets*seenWays*asyncShards < keys && 2*sets*perSet <= maxBytes/seenShare {
		sets <<= 1
	}
	t := &seenTable{bytes: sets * perSet}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.tags = make([]atomic.Uint64, sets*8) // 64-byte aligned: a large allocation
		sh.views = make([]seenView, sets*seenWays)
		sh.mask = uint64(sets - 1)
		// Touched now, a page at a time, as the first-sight table is: the
		// table is resident from the start, and a check never pays for
		// faulting in its page.
		for j := 0; j < len(sh.tags); j += 4096 / 8 {
			sh.tags[j].Store(0)
		}
		for j := 0; j < len(sh.views); j += pageSeen {
			sh.views[j].at = 0
		}
	}
	return t
}

func (t *seenTable) shard(fp fingerprint) *seenShard {
	return &t.shards[fp.hi%asyncShards]
}

// meta returns the meta word of fp's set (see seenShard.tags).
func (t *seenTable) meta(fp fingerprint) *atomic.Uint64 {
	sh := t.shard(fp)
	return &sh.tags[int(fp.lo&sh.mask)*8+seenWays]
}

// tag returns the tag of entry e.
func (sh *seenShard) tag(e int) *atomic.Uint64 {
	return &sh.tags[e/seenWays*8+e%seenWays]
}

// find returns the index of fp's entry (in views), or -1.
func (sh *seenShard) find(fp fingerprint) int {
	set, tag := int(fp.lo&sh.mask), seenTag(fp)
	tags := sh.tags[set*8 : set*8+seenWays]
	for w := range tags {
		if tags[w].Load() == tag {
			return set*seenWays + w
		}
	}
	return -1
}

// has reports whether fp may have an entry, without the lock: false is
// sure but for an answer written meanwhile (the check then asks the store
// as if it were not there, and writes its own answer).
func (sh *seenShard) has(fp fingerprint) bool {
	return sh.find(fp) >= 0
}

// put takes r, the store's answer about hit i of c at now, as the view of
// fp's entry, unless the entry has an answer of a later time (kept, as a
// slot keeps it); a key without an entry takes a free one of its set, or
// the next in turn. limit is limitSum of the hit's limit and c's shadow
// flag. The shard is locked.
func (sh *seenShard) put(fp fingerprint, c *sluice.Check, i int, limit uint64, r *sluice.HitResult, now int64) {
	j := sh.find(fp)
	if j >= 0 && now < sh.views[j].at {
		return // a later answer is already the view
	}
	if j < 0 {
		set := int(fp.lo & sh.mask)
		tags := sh.tags[set*8 : set*8+seenWays]
		w := int(sh.hand % seenWays)
		for x := range tags {
			if tags[x].Load() == 0 {
				w = x
				break
			}
		}
		if w == int(sh.hand%seenWays) {
			sh.hand++
		}
		tags[w].Store(seenTag(fp))
		j = set*seenWays + w
	}
	sh.views[j] = seenView{
		at: now, remaining: r.Remaining, used: r.Used, retryAfter: r.RetryAfter, resetAfter: r.ResetAfter,
		limit: limit,
	}
	if !r.Allowed && !r.Shadow {
		sh.views[j].denied, sh.views[j].deniedCost = true, c.Cost
	}
}

// forget frees fp's entry (after a reset, or once its key has a slot).
// The shard is locked.
func (sh *seenShard) forget(fp fingerprint) {
	if i := sh.find(fp); i >= 0 {
		sh.tag(i).Store(0)
	}
}

// limitSum is a digest of what a slot's view depends on besides the
// fingerprint (see slot.sameLimit): the limit's rate, resolution and
// shadow flag, and the check's shadow flag.
func (a *Async) limitSum(l *sluice.Limit, shadow bool) uint64 {
	var h hasher
	h.init(&a.secret)
	h.word(uint64(l.Rate), uint64(l.Resolution))
	h.word(btou(l.Shadow)|btou(shadow)<<1, 0)
	return h.a ^ h.b
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
	l := &k.hit.Limit
	limit := a.limitSum(l, k.shadow)
	sh := a.seen.shard(fp)
	if !sh.has(fp) {
		return nil // most keys seen once: no lock taken
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := sh.find(fp)
	if i < 0 {
		return nil
	}
	v := &sh.views[i]
	if time.Duration(now-v.at) > a.maxViewAge || v.limit != limit {
		return nil
	}
	s := a.addSlot(k, fp)
	if s == nil {
		a.overflow.Add(1)
		return nil
	}
	sh.tag(i).Store(0)
	a.seen.meta(fp).Add(madeOne)
	s.mu.Lock()
	if s.viewAt == 0 && !s.dead {
		s.key = *k
		s.remaining, s.used = v.remaining, v.used
		s.retryAfter, s.resetAfter = v.retryAfter, v.resetAfter
		s.viewAt, s.blind, s.fromRecord = v.at, false, false
		s.deniedCost, s.deniedUntil = 0, 0
		if v.denied {
			s.deniedCost, s.deniedUntil = v.deniedCost, v.at+int64(hold(*l, v.retryAfter))
		}
	}
	s.lastUse = max(s.lastUse, now)
	s.mu.Unlock()
	return s
}

// seeAnswer takes r, the store's answer about hit i of c at now, as the
// view of its key: of its slot if it has one, else of its entry in the
// seen table (no slot is made: see promote). made is the count of slots
// made from fp's set read before the check found fp had no slot: while
// it is unchanged, fp still has none, and the slots are not looked up.
func (a *Async) seeAnswer(c *sluice.Check, i int, fp fingerprint, made uint64, r *sluice.HitResult, now int64) {
	limit := a.limitSum(&c.Hits[i].Limit, c.Shadow)
	sh := a.seen.shard(fp)
	sh.mu.Lock()
	if a.seen.meta(fp).Load()/madeOne != made {
		if s := a.slot(fp); s != nil {
			sh.mu.Unlock()
			s.mu.Lock()
			a.setView(s, c, i, r, now)
			s.mu.Unlock()
			return
		}
	}
	sh.put(fp, c, i, limit, r, now)
	sh.mu.Unlock()
}

// forgetSeen frees the seen table's entry of fp.
func (a *Async) forgetSeen(fp fingerprint) {
	sh := a.seen.shard(fp)
	sh.mu.Lock()
	sh.forget(fp)
	sh.mu.Unlock()
}
