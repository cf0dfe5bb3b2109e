package edge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// A BatchRecorder adds the cost of many checks to their state without
// deciding them: cost admitted elsewhere (an Async's first sight) and sent
// afterwards. Each check has one hit and a cost > 0. RecordBatch sets
// recorded[i] to the cost recorded for checks[i] (its Cost, or less, down
// to 0, where the state had no room for it: nothing past the limit is
// written), to -1 when the store cannot record it and never will (its key
// holds data of another type), or to any value below -1 when it was not
// sent (its call failed): the caller sends those again. created, when not
// nil (of at least len(checks)), has created[i] set when checks[i]'s record
// created its key's state (the store held nothing of it: it holds exactly
// recorded[i] then, what the reply to a check of that cost would say), and
// false when the store does not know or does not tell. The Redis store
// implements it with one script call per few hundred records, and a Guard
// passes it through (errors.ErrUnsupported when its store does not).
type BatchRecorder interface {
	RecordBatch(ctx context.Context, checks []sluice.Check, recorded []int64, created []bool) error
}

// firstBatch is the most first-sight records sent in one call: 1.2-2.3 ms
// of Redis's time for sliding windows not stored yet (a pipelined SET of
// 2.4-4.5 µs each, measured on a 2-core machine), which a check waiting
// behind it can afford. Each call costs this process about two round
// trips (the store's clock, then the records), each a write, a read and
// the wake-ups of the goroutines between them: in calls of 128 records
// wake-ups and syscalls were about 0.6 µs of its CPU per record (a CPU
// profile of BenchmarkFirstSight), and calls of 512 cost less CPU per
// decision in each of 4 interleaved rounds.
const firstBatch = 512

// A firstEntry remembers the cost admitted on first sight on one key, until
// the end of the window of its first admission.
type firstEntry struct {
	fp    fingerprint
	until int64 // ns since base; the entry is free once until <= now
	used  int64
	gen   int64 // the shard's generation at the last admission
	rec   int32 // while gen is the shard's: its record's index in recs (at most maxRecs)
	// made: a record of the key created its state in the store, which
	// then held nothing of it; the key's next check past the budget takes
	// used as the store's reply (see madeSlot), once.
	made bool
}

// A firstRecord is a first-sight admission waiting to be sent.
type firstRecord struct {
	hit   sluice.Hit
	group string
	cost  int64
	at    int64 // ns since base
	// fp and pos, the key's fingerprint and its entry's index in its
	// shard, find the entry again without a lookup (settleFirst); the entry
	// is the key's while it holds fp and is in its window.
	fp  fingerprint
	pos uint32
}

// firstEntryBytes and firstRecordBytes are what the first-sight table
// holds per entry and per record waiting, in bytes.
const (
	firstEntryBytes  = int64(unsafe.Sizeof(firstEntry{}))
	firstRecordBytes = int64(unsafe.Sizeof(firstRecord{}))
)

// firstShard is one shard of the first-sight table: a set-associative
// array of entries (ways per set, no pointers for the collector to scan)
// and the records admitted since the last round.
type firstShard struct {
	mu      sync.Mutex
	entries []firstEntry
	mask    uint64 // sets - 1
	recs    []firstRecord
	// gen counts the rounds that took the shard's records; done is the
	// generation of the last such round that is over: an entry's records
	// are all sent (or failed) once done >= its gen.
	gen, done int64
	_         [24]byte // no false sharing with the next shard's lock
}

// firstTable is an Async's first-sight state: which keys were admitted on
// first sight in their current window, and the records to send. Keys seen
// once hold an entry of firstEntryBytes and a record until the next round:
// no slot, no goroutine, no timer, no map.
type firstTable struct {
	shards  [asyncShards]firstShard
	held    atomic.Int64 // records not yet sent or dropped
	maxRecs int64
	// out holds a round's records, retry those whose call failed: the
	// coordinator's and the flushers' (under retryMu).
	out     []firstRecord
	retryMu sync.Mutex
	retry   []firstRecord
	// batch is false once the store turned out not to record in batches:
	// records then go as checks.
	batch atomic.Bool
	// taken is each shard's generation taken by the round under way.
	taken [asyncShards]int64
	// roundEnd is closed when the next round that takes records is over;
	// want asks for one, even among urgent rounds.
	roundMu  sync.Mutex
	roundEnd chan struct{}
	want     atomic.Bool
}

// firstSlack is how many entries the table has per key it is sized for:
// with 8 ways per set, a new key finds its set full (and asks the store)
// for about 2% of keys when the table holds as many keys as half its
// entries, 0.02% at a quarter.
const firstSlack = 2

// pageEntries is the entries of the first-sight table per 4 KiB page.
const pageEntries = 4096 / int(firstEntryBytes)

// newFirstTable returns a table of at least firstSlack × keys entries
// (rounded up to whole sets of ways per shard, a power of two) holding at
// most keys records waiting.
func newFirstTable(keys int64) *firstTable {
	t := &firstTable{maxRecs: min(keys, math.MaxInt32)} // an entry's rec is an int32
	sets := uint64(1)
	for int64(sets*ways*asyncShards) < firstSlack*keys {
		sets <<= 1
	}
	for i := range t.shards {
		t.shards[i].entries = make([]firstEntry, sets*ways)
		// Touched now, a page at a time: the table is resident from the
		// start, and a check never pays for faulting in its page.
		for j := 0; j < len(t.shards[i].entries); j += pageEntries {
			t.shards[i].entries[j].until = 0
		}
		t.shards[i].mask = sets - 1
		t.shards[i].gen = 1
	}
	t.batch.Store(true)
	return t
}

// admitFirst decides c, a check of one hit whose key has no slot, on first
// sight: allowed locally while the cost admitted on first sight on its key
// in this window stays within min(FirstSight, Rate). Otherwise it writes
// nothing and c goes to the store: at once (wait nil) when c is not for
// first sight (a shadow check, a cost of 0 or past the budget, the table's
// set or its records full); when the key's first-sight budget is spent
// and its record is still waiting for a round, with that record (owed,
// taken out of the round: the caller sends it with c, see
// checkWithRecord); or, when its record is in a round under way, once
// wait is closed: the store, not knowing that cost, would admit it again.
//
// made > 0 is the cost the store holds of the key when a record of it
// created its state (and nothing of the key is unsent): the caller takes
// it as the store's reply at madeAt (see madeSlot).
func (a *Async) admitFirst(c *sluice.Check, fp fingerprint, now int64, d *sluice.Decision) (ok bool, wait <-chan struct{}, owed firstRecord, made, madeAt int64) {
	h := &c.Hits[0]
	budget := min(a.firstSight, h.Limit.Rate)
	t := a.first
	if c.Cost <= 0 || c.Cost > budget || c.Shadow || h.Limit.Shadow {
		return false, nil, owed, 0, 0
	}
	sh := &t.shards[fp.hi%asyncShards]
	sh.mu.Lock()
	i, free := sh.find(fp, now)
	var e *firstEntry
	if i >= 0 {
		e = &sh.entries[i]
	}
	if e != nil && e.used+c.Cost > budget {
		if r := sh.waiting(e); r != nil {
			// Its record waits for the next round: this check takes it
			// and sends it with itself, rather than waiting for a round.
			owed = *r
			r.cost = 0 // taken: takeFirst skips it
			e.gen = 0  // sent, as far as later checks go
			sh.mu.Unlock()
			return false, nil, owed, 0, 0
		}
		unsent := e.gen > sh.done
		if !unsent && e.made {
			e.made = false
			made, madeAt = e.used, e.until-int64(h.Limit.Window)
		}
		sh.mu.Unlock()
		if unsent {
			return false, t.nextRound(a), owed, 0, 0
		}
		if made > 0 {
			return false, nil, owed, made, madeAt
		}
		return false, nil, owed, 0, 0
	}
	hit := *h
	hit.Limit.Name = ""
	if r := sh.waiting(e); r != nil && r.hit == hit && r.group == c.Group {
		// A second admission before the round: one record, of both.
		e.used += c.Cost
		r.cost += c.Cost
		used := e.used
		sh.mu.Unlock()
		a.admittedFirst(c.Cost, used, budget, d)
		return true, nil, owed, 0, 0
	}
	if t.held.Load() >= t.maxRecs {
		sh.mu.Unlock()
		a.kickRound()
		return false, nil, owed, 0, 0
	}
	if e == nil {
		if free < 0 {
			// Every entry of the set is in its window: forgetting one
			// would let its key be admitted on first sight again.
			sh.mu.Unlock()
			return false, nil, owed, 0, 0
		}
		i, e = free, &sh.entries[free]
		*e = firstEntry{fp: fp, until: now + int64(h.Limit.Window)}
	} else {
		e.made = false // a second record: the store may hold more than used
	}
	e.used += c.Cost
	e.gen = sh.gen
	e.rec = int32(len(sh.recs))
	used := e.used
	sh.recs = append(sh.recs, firstRecord{hit: hit, group: c.Group, cost: c.Cost, at: now, fp: fp, pos: uint32(i)})
	sh.mu.Unlock()
	t.held.Add(1)
	a.admittedFirst(c.Cost, used, budget, d)
	return true, nil, owed, 0, 0
}

// find returns the index in sh.entries of fp's entry, in its window at
// now, or -1; and that of its set's first free entry, or -1. The shard is
// locked.
func (sh *firstShard) find(fp fingerprint, now int64) (e, free int) {
	base := int(fp.lo&sh.mask) * ways
	free = -1
	for i := range ways {
		x := &sh.entries[base+i]
		if x.until <= now {
			if free < 0 {
				free = base + i
			}
			continue
		}
		if x.fp == fp {
			return base + i, free
		}
	}
	return -1, free
}

// waiting returns e's record if it waits for the next round (not taken by
// a round or a check), else nil. The shard is locked.
func (sh *firstShard) waiting(e *firstEntry) *firstRecord {
	if e == nil || e.gen != sh.gen || sh.recs[e.rec].cost <= 0 {
		return nil
	}
	return &sh.recs[e.rec]
}

// admittedFirst counts an admission on first sight of cost and writes
// its decision: used of budget.
func (a *Async) admittedFirst(cost, used, budget int64, d *sluice.Decision) {
	a.pending.Add(cost)
	a.firstSeen.Add(1)
	a.local.Add(1)
	d.Prepare(1)
	d.Hits[0] = sluice.HitResult{Allowed: true, Used: float64(used), Remaining: budget - used}
	d.Conclude(sluice.FromLocalView)
}

// checkWithRecord decides c, the check of a key whose first-sight budget
// is spent, by the store, with r, the key's record taken out of the
// round: one check of both costs when they are of the same key and limit
// (allowed: both are recorded, one call); otherwise, or when the store
// denies both, r is recorded alone first (what fits) and c asked after
// it, so that the store decides c knowing r, as after a round. A call that
// fails leaves r for the next round.
func (a *Async) checkWithRecord(ctx context.Context, c *sluice.Check, r firstRecord, now int64, d *sluice.Decision) error {
	hit := c.Hits[0]
	hit.Limit.Name = ""
	if hit == r.hit && c.Group == r.group && !c.Shadow {
		both := *c
		both.Cost += r.cost
		err := a.checkSync(ctx, both, d, now, nil)
		if err == nil && d.Source == sluice.FromStore && d.Allowed {
			a.pending.Add(-r.cost)
			a.first.held.Add(-1)
			return nil
		}
		if err != nil || d.Source != sluice.FromStore {
			// Recorded or not, as a call that timed out may be: sent
			// again, which can only over-count.
			a.retryFirst(r)
			return err
		}
	}
	var buf flushBuf
	a.sendFirst([]firstRecord{r}, &buf)
	return a.checkSync(ctx, *c, d, now, nil)
}

// firstSpent is the cost of an entry whose sighting had a record
// refused: past any budget, so that its key's checks go to the store until
// the sighting ends.
const firstSpent = math.MaxInt64 / 2

// settleFirst takes the answer to r, recorded of its cost (see
// BatchRecorder), back into the first-sight entry it was admitted from,
// while the entry is still that sighting (its key's, and in the window of
// the sighting's first admission, at most r's):
//
//   - a record that created the key's state marks the entry made, when the
//     entry holds nothing else: the store holds exactly what was admitted
//     here (the entry's used: a second admission clears the mark), what the
//     reply to a check of that cost would say, and the key's next check
//     past its budget takes it as its view (madeSlot) instead of asking
//     the store;
//   - any other record of its whole cost gives it back to the entry's
//     budget: the store holds it, so it is no longer a risk, and the key's
//     next checks are admitted here again rather than asking the store;
//   - a record refused, in part or whole (the key was full), or that can
//     never be made, spends the budget for the rest of the sighting: the
//     store decides the key's checks.
//
// So the cost admitted here and not confirmed stays within the budget, and
// after a refusal nothing more is admitted: the over-admission of a
// sighting is what was unconfirmed at its first refusal, at most the
// budget (docs/failure.md, "First sight").
func (a *Async) settleFirst(r *firstRecord, recorded int64, created bool, now int64) {
	sh := &a.first.shards[r.fp.hi%asyncShards]
	sh.mu.Lock()
	e := &sh.entries[r.pos]
	if e.fp == r.fp && e.until > now && e.until <= r.at+int64(r.hit.Limit.Window) && e.used < firstSpent {
		switch {
		case recorded == r.cost && created && e.used == r.cost:
			e.made = true
		case recorded == r.cost:
			e.used = max(0, e.used-r.cost)
		default:
			e.used = firstSpent
			e.made = false
		}
	}
	sh.mu.Unlock()
}

// madeSlot returns the slot of c's key, whose record created the key's
// state, holding used as of at (the key's first admission; the record
// was sent later, so the view is older than it is): its view is
// then that reply, used and the limit less it, so that the key's checks
// are decided here from this process's share of what remains, like those
// of any key with a view. A slot that has a view keeps it (a reply about
// the key since: made after the record, it knows more). Any reply of the
// store replaces this view whatever its time (a call run after the
// record, since the record found no state: see fromRecord). nil when the
// table of slots is full.
//
// No slot made since the record can have been swept while the view is
// young enough to be used (a slot is swept after MaxViewAge idle, and a
// view older than MaxViewAge is not used): a view of used never ignores
// the cost this process sent through a slot.
func (a *Async) madeSlot(c *sluice.Check, fp fingerprint, used, at, now int64) *slot {
	k := slotKeyOf(c, 0)
	s := a.addSlot(&k, fp)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if s.viewAt == 0 && !s.dead {
		l := c.Hits[0].Limit
		s.key = k
		// ResetAfter: the window, the least a sliding window's is then
		// (the store's own clock is not known here).
		s.setView(&sluice.HitResult{Allowed: true, Used: float64(used), Remaining: l.Rate - used, ResetAfter: l.Window}, at)
		s.fromRecord = true
		s.lastUse = max(s.lastUse, now)
	}
	s.mu.Unlock()
	return s
}

// retryFirst keeps r, taken from the round and not sent, for the next.
func (a *Async) retryFirst(r firstRecord) {
	a.first.retryMu.Lock()
	a.first.retry = append(a.first.retry, r)
	a.first.retryMu.Unlock()
}

// nextRound returns a channel closed when the next round that sends
// records is over, and asks for one now.
func (t *firstTable) nextRound(a *Async) <-chan struct{} {
	t.roundMu.Lock()
	if t.roundEnd == nil {
		t.roundEnd = make(chan struct{})
	}
	ch := t.roundEnd
	t.roundMu.Unlock()
	t.want.Store(true)
	a.kickRound()
	return ch
}

// kickRound asks for a flush round at once.
func (a *Async) kickRound() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// forgetFirst removes the first-sight entry of fp, so that the key's next
// check is a new sighting (after a reset).
func (a *Async) forgetFirst(fp fingerprint) {
	sh := &a.first.shards[fp.hi%asyncShards]
	sh.mu.Lock()
	set := sh.entries[(fp.lo&sh.mask)*ways:][:ways]
	for i := range set {
		if set[i].fp == fp {
			set[i] = firstEntry{}
		}
	}
	sh.mu.Unlock()
}

// takeFirst gathers the records to send this round, the coordinator's:
// those whose call failed last round first, less those older than their
// window (dropped), then those admitted since.
func (a *Async) takeFirst(now int64) []firstRecord {
	t := a.first
	out := t.out[:0]
	t.retryMu.Lock()
	for _, r := range t.retry {
		if now-r.at > int64(r.hit.Limit.Window) {
			a.dropped.Add(uint64(r.cost))
			a.pending.Add(-r.cost)
			t.held.Add(-1)
			continue
		}
		out = append(out, r)
	}
	clear(t.retry)
	t.retry = t.retry[:0]
	t.retryMu.Unlock()
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, r := range sh.recs {
			if r.cost > 0 { // else taken by a check (checkWithRecord)
				out = append(out, r)
			}
		}
		clear(sh.recs)
		sh.recs = sh.recs[:0]
		t.taken[i] = sh.gen
		sh.gen++
		sh.mu.Unlock()
	}
	t.out = out
	return out
}

// endFirst ends a round that took records: their keys' entries are marked
// sent, those waiting for it are woken, and the records released.
func (a *Async) endFirst() {
	t := a.first
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		sh.done = t.taken[i]
		sh.mu.Unlock()
	}
	t.roundMu.Lock()
	if t.roundEnd != nil {
		close(t.roundEnd)
		t.roundEnd = nil
	}
	t.roundMu.Unlock()
	clear(t.out)
	t.out = t.out[:0]
}

// sendFirst sends recs, part of a round, and accounts for each: recorded,
// refused (the key was full: over-admission, Unrecorded), impossible
// (Dropped), or not sent (kept for the next round).
func (a *Async) sendFirst(recs []firstRecord, buf *flushBuf) {
	buf.hits = buf.hits[:0]
	for i := range recs {
		buf.hits = append(buf.hits, recs[i].hit)
	}
	buf.checks = buf.checks[:0]
	for i := range recs {
		buf.checks = append(buf.checks, sluice.Check{Hits: buf.hits[i : i+1], Cost: recs[i].cost, Group: recs[i].group})
	}
	buf.recorded = slices.Grow(buf.recorded[:0], len(recs))[:len(recs)]
	buf.created = slices.Grow(buf.created[:0], len(recs))[:len(recs)]
	clear(buf.created)
	a.record(buf.checks, buf.recorded, buf)
	now := a.mono()
	var failed []firstRecord
	for i, r := range buf.recorded {
		cost := recs[i].cost
		switch {
		case r >= 0:
			a.settleFirst(&recs[i], r, buf.created[i], now)
			a.pending.Add(-cost)
			a.unrecorded.Add(uint64(cost - min(r, cost)))
			a.first.held.Add(-1)
		case r == -1:
			a.settleFirst(&recs[i], r, false, now)
			a.pending.Add(-cost)
			a.dropped.Add(uint64(cost))
			a.first.held.Add(-1)
		default:
			failed = append(failed, recs[i])
		}
	}
	clear(buf.checks)
	if len(failed) > 0 {
		a.first.retryMu.Lock()
		a.first.retry = append(a.first.retry, failed...)
		a.first.retryMu.Unlock()
	}
}

// notSent marks a record whose call failed.
const notSent = -2

// record sends checks, records of one hit each, in one RecordBatch when
// the store takes them (see BatchRecorder), else as checks one by one.
func (a *Async) record(checks []sluice.Check, recorded []int64, buf *flushBuf) {
	for i := range recorded {
		recorded[i] = notSent
	}
	if r, ok := a.next.(BatchRecorder); ok && a.first.batch.Load() {
		ctx, cancel := context.WithTimeout(a.callCtx, a.timeout)
		a.flushCalls.Add(1)
		err := r.RecordBatch(ctx, checks, recorded, buf.created)
		cancel()
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			a.first.batch.Store(false)
			a.flushCalls.Add(^uint64(0))
		case errors.Is(err, sluice.ErrInvalid):
			// Checked when admitted: cannot be sent, ever.
			for i := range recorded {
				recorded[i] = -1
			}
			a.logFlush(err)
			return
		case err != nil:
			a.flushErrs.Add(1)
			a.logFlush(err)
			return
		default:
			return
		}
	}
	for i := range checks {
		rec, err := a.send(checks[i], &buf.d)
		if err != nil {
			return // the rest are not sent either: the store is failing
		}
		recorded[i] = rec
	}
}

// logFlush logs a failed flush call, at most once per LogInterval.
func (a *Async) logFlush(err error) {
	if ok, suppressed := a.logs.allow(); ok {
		a.log.Warn("edge: async flush failed; the cost stays owed", "error", err.Error(), "suppressed", suppressed)
	}
}

// errNoBatch is a Guard's RecordBatch error when its store does not record
// in batches.
var errNoBatch = fmt.Errorf("edge: record: the store does not record in batches: %w", errors.ErrUnsupported)
