package edge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
)

// Check implements sluice.Limiter. When every hit's key has a view younger
// than MaxViewAge, the check is decided locally (Source
// sluice.FromLocalView): a non-shadow hit allows if the cost admitted here
// and not yet recorded, plus c.Cost, fits in this process's share of what
// the view says remains. A hit that does not fit denies locally only while
// a denial by the store stands; otherwise the check is asked of the store,
// by one caller per key at a time, the others waiting for its answer. A
// key without a view goes to the store. After Close every check goes to
// the store.
func (a *Async) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("edge: check: %w", err)
	}
	if a.next == nil {
		return fmt.Errorf("edge: %w: an Async is made by NewAsync", sluice.ErrInvalid)
	}
	a.active.Add(1)
	defer func() { // the last check to end after Close wakes it
		if a.active.Add(-1) == 0 && a.closed.Load() {
			a.idleOnce.Do(func() { close(a.idle) })
		}
	}()
	if a.closed.Load() {
		return a.next.Check(ctx, c, d)
	}
	now := a.mono()
	var buf [sluice.MaxHits]*slot
	var fps [sluice.MaxHits]fingerprint
	slots, missing := buf[:len(c.Hits)], false
	for i := range c.Hits {
		if c.Hits[i].Limit.Window <= a.interval { // cost sent a round later could miss its window
			return a.checkSync(ctx, c, d, now, nil, nil, nil)
		}
	}
	for i := range c.Hits {
		k := slotKeyOf(&c, i)
		fps[i] = a.fingerprint(&k)
		slots[i] = a.slot(fps[i])
		missing = missing || slots[i] == nil
	}
	if missing {
		return a.checkSync(ctx, c, d, now, nil, slots, fps[:len(c.Hits)])
	}
	return a.decideOrAsk(ctx, &c, slots, d)
}

// mono returns the ns since the limiter's base: > 0, so 0 means never.
func (a *Async) mono() int64 { return int64(a.clock()) }

// maxWaits bounds a check's waits before it decides from the views.
const maxWaits = 3

// A verdict is what the views say of a check: decided locally, or ask
// the store for want of a usable view, or for want of budget.
type verdict uint8

const (
	decided verdict = iota
	noView
	short
)

// decideOrAsk decides c from the views of its slots, or asks the store:
// one caller per key at a time, the others waiting for its answer. A key
// is never asked about alone while cost admitted here is unsent on it
// (else the store would admit that cost again): a one-hit check asks for
// that cost and its own together (askWithUnsent); a check of more hits
// first waits for the key's flush. If flushes keep failing, it decides
// from the view after maxWaits waits, as during any outage.
func (a *Async) decideOrAsk(ctx context.Context, c *sluice.Check, slots []*slot, d *sluice.Decision) error {
	for waits := 0; ; waits++ {
		now := a.mono()
		lockAll(slots, true)
		v := a.decide(c, slots, now, d, waits >= maxWaits)
		if v == decided {
			lockAll(slots, false)
			a.local.Add(1)
			a.yield()
			return nil
		}
		var wait <-chan struct{}
		if v == short {
			if t, ok := a.takeUnsent(c, slots, now, waits > 0); ok {
				slots[0].asking = true // others wait for this answer
				lockAll(slots, false)
				return a.askWithUnsent(ctx, c, &t, d, now)
			}
			wait = a.waitFor(c, slots, now, waits > 0)
		}
		if wait == nil {
			for _, s := range slots { // others wait for this answer
				s.asking = true
			}
			lockAll(slots, false)
			return a.checkSync(ctx, *c, d, now, slots, nil, nil)
		}
		lockAll(slots, false)
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("edge: check: waiting for the store's answer: %w", ctx.Err())
		}
	}
}

// takeUnsent takes the unsent cost of the one key of a one-hit check
// short on it (slots, locked), for the check to ask the store about it
// together with its own cost (askWithUnsent), rather than wait for a flush
// of it. It reports false when the check has more hits, when another
// caller's ask is to be waited for first (see waitFor), when nothing is
// pending or a flush of the key is under way, or when the two costs
// together exceed the limit's rate (no check may ask for more).
func (a *Async) takeUnsent(c *sluice.Check, slots []*slot, now int64, waited bool) (taken, bool) {
	if len(slots) != 1 {
		return taken{}, false
	}
	s := slots[0]
	if s.flushing || s.pending == 0 || s.asking && !waited || s.pending+c.Cost > c.Hits[0].Limit.Rate {
		return taken{}, false
	}
	return a.takeLocked(s, now)
}

// askWithUnsent asks the store about c, a one-hit check short on its key,
// together with t, the key's unsent cost taken from it: one call of cost
// t.p + c.Cost, so that the check waits for no flush round. Allowed, the
// store recorded both, and its answer is the decision and the key's view.
// Denied, it recorded neither: what remains is less than t.p + c.Cost, so
// once t is recorded less than c.Cost remains, and c is denied as the store
// would deny it then (its Used and Remaining count t). t is then owed
// again and sent at once. A degraded decision (the failure policy's) is
// the check's, and t is owed again.
func (a *Async) askWithUnsent(ctx context.Context, c *sluice.Check, t *taken, d *sluice.Decision, now int64) error {
	both := *c
	both.Cost += t.p
	a.sync.Add(1)
	a.asking.Add(1)
	err := a.next.Check(ctx, both, d)
	a.asking.Add(-1)
	answered := err == nil && d.Source == sluice.FromStore && len(d.Hits) == 1
	s := t.s
	s.mu.Lock()
	s.asking = false
	s.lastUse = max(s.lastUse, now)
	if answered && d.Allowed {
		a.finishLocked(t, t.p, nil, d, 0)
	} else {
		a.finishLocked(t, 0, errNotRecorded, d, 0)
		a.enqueue(s, true)
		if answered {
			h := &d.Hits[0]
			if now >= s.viewAt && s.key.hit.Limit == t.key.hit.Limit {
				// What remains before t, which is unsent again; the denial
				// stands for c.
				a.setView(s, c, 0, h, now)
				s.deniedAhead = s.deniedUntil > now && !expiresInOrder(c.Hits[0].Limit)
			}
			h.Used += float64(t.p)
			h.Remaining = max(0, h.Remaining-t.p)
		}
	}
	s.mu.Unlock()
	runtime.Gosched() // let the callers woken run (see DenyCache.leave)
	return err
}

// expiresInOrder reports whether, under l's algorithm, usage recorded now
// expires no sooner than usage recorded before: then the store's denial of
// cost p+c stands for c once p is recorded, for as long as the store said.
// Not so for sliding-window (a unit recorded now weighs less once its
// window is the previous one) and decay (a unit recorded now decays too).
func expiresInOrder(l sluice.Limit) bool {
	switch l.Algo() {
	case sluice.Log, sluice.GCRA, sluice.Buckets:
		return true
	}
	return false
}

// errNotRecorded is what finishes an unsent cost that a denied or
// degraded askWithUnsent did not record: it is owed again.
var errNotRecorded = errors.New("edge: not recorded")

// waitFor returns what a check short on some of slots, all locked, waits
// for before asking the store: another caller's ask (once: an allowed ask
// leaves no denial standing, and each waiter then asks), or the flush of
// a short key's unsent cost (queued as urgent), or nil to ask now.
func (a *Async) waitFor(c *sluice.Check, slots []*slot, now int64, waited bool) <-chan struct{} {
	for _, s := range slots {
		if s.asking && !waited {
			return s.waitChan()
		}
	}
	for _, s := range slots {
		if s.unsent() == 0 || !a.isShort(c, s, now) {
			continue
		}
		if !s.flushing {
			a.enqueue(s, true)
		}
		return s.waitChan()
	}
	return nil
}

// yield lets other goroutines run now and then while a check is asked of
// the store, as a deny cache hit does: callers deciding locally in a loop
// would otherwise keep the reply from running past the store's timeout.
func (a *Async) yield() {
	if a.asking.Load() > 0 && rand.N(yieldEvery) == 0 {
		runtime.Gosched()
	}
}

// lockAll locks (or unlocks) slots in the order of their ids.
func lockAll(slots []*slot, lock bool) {
	var buf [sluice.MaxHits]*slot
	sorted := append(buf[:0], slots...)
	slices.SortFunc(sorted, func(x, y *slot) int { return cmp.Compare(x.id, y.id) })
	for _, s := range sorted {
		if lock {
			s.mu.Lock()
		} else {
			s.mu.Unlock()
		}
	}
}

// checkSync passes c to the store and takes its reply as the view of c's
// keys: of asked, its slots marked as asked by this caller, or else of
// found, the slots of c's keys that had one before the call (nil for a
// key without), and of the keys of fps, their fingerprints (nil: none),
// seen often enough since to get one (see viewSight).
func (a *Async) checkSync(ctx context.Context, c sluice.Check, d *sluice.Decision, now int64, asked, found []*slot, fps []fingerprint) error {
	a.sync.Add(1)
	a.asking.Add(1)
	err := a.next.Check(ctx, c, d)
	a.asking.Add(-1)
	// A degraded decision says nothing of the shared usage.
	ok := err == nil && d.Source == sluice.FromStore && len(d.Hits) == len(c.Hits)
	for i := range c.Hits {
		var s *slot
		switch {
		case asked != nil:
			s = asked[i]
		case ok && fps != nil:
			if s = found[i]; s == nil && a.seen.sighted(fps[i]) {
				k := slotKeyOf(&c, i)
				if s = a.addSlot(&k, fps[i]); s == nil {
					a.overflow.Add(1)
				}
			}
		}
		if s == nil {
			continue
		}
		s.mu.Lock()
		if asked != nil {
			s.asking = false
			s.broadcast()
		}
		if ok {
			a.setView(s, &c, i, &d.Hits[i], now)
		}
		s.mu.Unlock()
	}
	if asked != nil {
		runtime.Gosched() // let the callers woken run (see DenyCache.leave)
	}
	return err
}

// setView takes r, the store's answer about hit i of c at now, as the view
// of s, locked, unless a later answer is: a denial stands until its
// RetryAfter (see hold).
func (a *Async) setView(s *slot, c *sluice.Check, i int, r *sluice.HitResult, now int64) {
	s.lastUse = max(s.lastUse, now)
	if now < s.viewAt {
		return
	}
	s.key = slotKeyOf(c, i)
	s.setView(r, now)
	if !r.Allowed && !r.Shadow {
		s.deniedCost, s.deniedUntil = c.Cost, now+int64(hold(c.Hits[i].Limit, r.RetryAfter))
	}
}

// setView takes r, the store's answer about s's key at at, as s's view. A
// standing denial stands on, usage recorded since only making it longer,
// unless r says its cost fits or it is deniedAhead.
func (s *slot) setView(r *sluice.HitResult, at int64) {
	s.view, s.viewAt = *r, at
	if s.deniedAhead || r.Remaining >= s.deniedCost {
		s.deniedCost, s.deniedUntil, s.deniedAhead = 0, 0, false
	}
}

// unsent is the cost admitted here that the store has not recorded yet.
func (s *slot) unsent() int64 { return s.pending + s.inflight }

// budget is what this process may admit on s's key before the next reply:
// its share of what remained at the last one, rounded down, so that the
// shares of Processes processes add up to at most what remained (rounded
// up, every process would admit the one unit that a key held at its limit
// frees at a time; here the store decides that unit).
func (a *Async) budget(s *slot) int64 {
	return s.view.Remaining / a.processes
}

// denied reports whether a denial by the store of cost on s's key, locked,
// still stands at now.
func (s *slot) denied(cost, now int64) bool {
	return now < s.deniedUntil && cost >= s.deniedCost
}

// isShort reports whether c's cost does not fit in the budget of s,
// locked, while no denial by the store stands: only the store knows.
func (a *Async) isShort(c *sluice.Check, s *slot, now int64) bool {
	return s.unsent()+c.Cost > a.budget(s) && !s.denied(c.Cost, now)
}

// decide decides c from the views of its slots, all locked. It reports
// noView when a view cannot be used (none, too old, of another limit, or
// the slot was dropped), and short when a non-shadow hit does not fit in
// its budget while no denial by the store stands, unless force.
func (a *Async) decide(c *sluice.Check, slots []*slot, now int64, d *sluice.Decision, force bool) verdict {
	v := decided
	deny := false
	for i, s := range slots {
		k := slotKeyOf(c, i)
		if s.dead || s.viewAt == 0 || time.Duration(now-s.viewAt) > a.maxViewAge || s.key.hit.Limit != k.hit.Limit || s.key.shadow != k.shadow {
			return noView
		}
		if c.Shadow || c.Hits[i].Limit.Shadow || s.unsent()+c.Cost <= a.budget(s) {
			continue
		}
		if s.denied(c.Cost, now) {
			deny = true // the store's own denial: exact
		} else {
			v = short
		}
	}
	if v == short && !deny && !force {
		return short
	}
	d.Prepare(len(slots))
	for i, s := range slots {
		d.Hits[i] = sluice.HitResult{Allowed: s.unsent()+c.Cost <= a.budget(s), Shadow: c.Shadow || c.Hits[i].Limit.Shadow}
	}
	d.Conclude(sluice.FromLocalView)
	for i, s := range slots {
		s.lastUse = now
		if d.Allowed && c.Cost > 0 {
			a.admit(s, c.Cost, now)
		}
		a.result(s, now, &d.Hits[i])
	}
	return decided
}

// admit adds cost to s's pending cost, queues s, and asks for a flush at
// once when the unsent cost reaches half of the budget.
func (a *Async) admit(s *slot, cost, now int64) {
	s.pending += cost
	s.owed.add(cost, now, int64(s.key.hit.Limit.Window))
	a.pending.Add(cost)
	a.enqueue(s, false)
	if 2*s.unsent() >= a.budget(s) {
		a.enqueue(s, true)
	}
}

// result fills r, whose Allowed and Shadow are set, from s's view.
func (a *Async) result(s *slot, now int64, r *sluice.HitResult) {
	age := time.Duration(now - s.viewAt)
	unsent := s.unsent()
	r.Used = s.view.Used + float64(unsent)
	r.Remaining = max(0, s.view.Remaining-unsent)
	r.ResetAfter = max(0, s.view.ResetAfter-age)
	if !r.Allowed {
		// The store's own wait, or the next flush.
		if r.RetryAfter = s.view.RetryAfter - age; r.RetryAfter <= 0 {
			r.RetryAfter = a.interval
		}
	}
}

// enqueue puts s, locked, on the queue, or on the urgent queue, which a
// kick sends at once, unless it is there.
func (a *Async) enqueue(s *slot, urgent bool) {
	on, q := &s.queued, &a.queue
	if urgent {
		on, q = &s.urgent, &a.urgent
	}
	if *on {
		return
	}
	*on = true
	a.qmu.Lock()
	*q = append(*q, s)
	a.qmu.Unlock()
	if urgent {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// Reset implements sluice.Limiter: it forgets c's keys here, their pending
// cost included (a reset forgets usage), then resets them in the store.
func (a *Async) Reset(ctx context.Context, c sluice.Check) error {
	if a.next == nil {
		return fmt.Errorf("edge: %w: an Async is made by NewAsync", sluice.ErrInvalid)
	}
	removed := make([]*slot, 0, len(c.Hits))
	for i := range c.Hits {
		k := slotKeyOf(&c, i)
		fp := a.fingerprint(&k)
		sh := a.shard(fp)
		sh.mu.Lock()
		if s := sh.m[fp]; s != nil {
			s.mu.Lock()
			a.remove(sh, s)
			s.mu.Unlock()
			removed = append(removed, s)
		}
		sh.mu.Unlock()
	}
	// A flush on its way would record after the reset: wait for it.
	for _, s := range removed {
		if err := s.waitFlush(ctx); err != nil {
			return fmt.Errorf("edge: reset: waiting for a flush of the key: %w", err)
		}
	}
	return a.next.Reset(ctx, c)
}

// waitFlush returns when no flush of s is under way, or ctx's error.
func (s *slot) waitFlush(ctx context.Context) error {
	for {
		s.mu.Lock()
		if !s.flushing {
			s.mu.Unlock()
			return nil
		}
		wait := s.waitChan()
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
