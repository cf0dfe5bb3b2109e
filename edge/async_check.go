package edge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/sluicehq/sluice"
)

// Check implements sluice.Limiter. When every hit's key has a view younger
// than MaxViewAge, the check is decided locally (Source
// sluice.FromLocalView): a non-shadow hit allows if the cost admitted here
// and not yet recorded by the store, plus c.Cost, fits in what the view
// says remains (or this process's share of it, see Processes). An allowed
// check's cost is added to each key's pending cost, which the flushers
// send. A hit that does not fit denies locally only while a denial by the
// store stands (its RetryAfter has not passed); otherwise the check is
// asked of the store, by one caller per key at a time, the others waiting
// for its answer. A key without a view goes to the store synchronously
// (or, with FirstSight, is admitted up to it), and the store's reply
// becomes the keys' view. After Close every check goes to the store.
func (a *Async) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("edge: check: %w", err)
	}
	if a.next == nil {
		return fmt.Errorf("edge: %w: an Async is made by NewAsync", sluice.ErrInvalid)
	}
	a.active.Add(1)
	defer a.checkDone()
	if a.closed.Load() {
		return a.next.Check(ctx, c, d)
	}
	now := a.mono()
	var buf [sluice.MaxHits]*slot
	var fps [sluice.MaxHits]fingerprint
	slots := buf[:len(c.Hits)]
	for i := range c.Hits {
		if c.Hits[i].Limit.Window <= a.interval {
			// Its cost, sent a round later, could count in the next window.
			return a.checkSync(ctx, c, d, now, nil, nil)
		}
		k := slotKeyOf(&c, i)
		fps[i] = a.fingerprint(&k)
		if slots[i] = a.slot(fps[i]); slots[i] == nil {
			if slots[i] = a.firstSightSlot(&c, &k, fps[i], now); slots[i] == nil {
				return a.checkSync(ctx, c, d, now, nil, fps[:len(c.Hits)])
			}
		}
	}
	return a.decideOrAsk(ctx, &c, slots, d)
}

// checkDone ends a check; the last one to end after Close wakes it.
func (a *Async) checkDone() {
	if a.active.Add(-1) == 0 && a.closed.Load() {
		a.idleOnce.Do(func() { close(a.idle) })
	}
}

// mono returns the time since the limiter's base, in nanoseconds: always
// > 0, so that 0 can mean "never".
func (a *Async) mono() int64 { return int64(a.clock()) }

// firstSightSlot returns a new slot for k with a first-sight view of
// FirstSight, or nil when first sight is off, does not cover c's cost, or
// the table is full.
func (a *Async) firstSightSlot(c *sluice.Check, k *slotKey, fp fingerprint, now int64) *slot {
	if a.firstSight <= 0 || c.Cost > a.firstSight {
		return nil
	}
	s := a.addSlot(k, fp)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if s.viewAt == 0 {
		s.view = sluice.HitResult{Remaining: min(a.firstSight, k.hit.Limit.Rate)}
		s.viewAt, s.blind, s.lastUse = now, true, now
	}
	s.mu.Unlock()
	return s
}

// maxWaits bounds the times a check waits for another caller's answer
// about one of its keys before it asks the store itself.
const maxWaits = 3

// A verdict is what the views say of a check.
type verdict uint8

const (
	decided verdict = iota // decided locally
	noView                 // a key has no usable view: ask the store
	short                  // a key's budget is spent, no denial stands: ask the store
)

// decideOrAsk decides c from the views of its slots, or asks the store:
// one caller per key at a time, the others waiting for its answer and
// deciding from the view it brings (a denial that stands, or room); if it
// brings neither, each asks the store itself. A key is asked about only
// when nothing admitted here is unsent on it (else the store, not knowing
// that cost, would admit it again): the caller first waits for the key's
// flush. If the flushes keep failing, it decides from the view after
// maxWaits waits, as during any outage.
func (a *Async) decideOrAsk(ctx context.Context, c *sluice.Check, slots []*slot, d *sluice.Decision) error {
	for waits := 0; ; waits++ {
		now := a.mono()
		order := lockOrder(slots)
		lock(slots, order)
		v := a.decide(c, slots, now, d, waits >= maxWaits)
		if v == decided {
			unlock(slots, order)
			a.local.Add(1)
			a.yield()
			return nil
		}
		var wait <-chan struct{}
		if v == short {
			wait = a.waitFor(c, slots, now, waits > 0)
		}
		if wait == nil {
			// This caller asks; the keys of c are marked so that others
			// wait for its answer.
			for _, s := range slots {
				s.asking = true
			}
			unlock(slots, order)
			return a.checkSync(ctx, *c, d, now, slots, nil)
		}
		unlock(slots, order)
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("edge: check: waiting for the store's answer: %w", ctx.Err())
		}
	}
}

// waitFor returns what a check short on some of slots, all locked, waits
// for before asking the store: another caller's ask (unless it has waited
// once: an ask that was allowed leaves no denial standing, and the store
// is then asked by each waiter, as without this layer), or a flush of the
// unsent cost of a short key (which it queues as urgent), or nil to ask
// now.
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
			a.urgentFlush(s)
		}
		return s.waitChan()
	}
	return nil
}

// yield lets other goroutines run after some local decisions while a
// check is being asked of the store, as a deny cache hit does (see
// DenyCache.yield): callers deciding locally in a loop would otherwise
// keep the asking caller and its reply from running past the store's
// timeout.
func (a *Async) yield() {
	if a.asking.Load() > 0 && rand.N(yieldEvery) == 0 {
		runtime.Gosched()
	}
}

func lock(slots []*slot, order []uint8) {
	for _, i := range order {
		slots[i].mu.Lock()
	}
}

func unlock(slots []*slot, order []uint8) {
	for _, i := range order {
		slots[i].mu.Unlock()
	}
}

// lockOrder returns the indexes of slots in the order of their ids, the
// order in which they are locked.
func lockOrder(slots []*slot) []uint8 {
	var buf [sluice.MaxHits]uint8
	order := buf[:len(slots)]
	for i := range order {
		order[i] = uint8(i)
		for j := i; j > 0 && slots[order[j]].id < slots[order[j-1]].id; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	return order
}

// checkSync passes c to the store and takes its reply as the view of c's
// keys. asked are c's slots, marked as being asked by this caller, or nil:
// then fps, when not nil, are the keys' fingerprints, and a key without a
// slot gets one if it was answered before (see seenFilter).
func (a *Async) checkSync(ctx context.Context, c sluice.Check, d *sluice.Decision, now int64, asked []*slot, fps []fingerprint) error {
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
			if s = a.slot(fps[i]); s == nil && a.seen.see(fps[i]) {
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
// of s, locked, unless a later answer is the view: the last limit checked
// is the slot's, and a denial stands until its RetryAfter (see hold).
func (a *Async) setView(s *slot, c *sluice.Check, i int, r *sluice.HitResult, now int64) {
	s.lastUse = max(s.lastUse, now)
	if now < s.viewAt && !s.blind {
		return
	}
	s.key = slotKeyOf(c, i)
	s.setView(r, now)
	if !r.Allowed && !r.Shadow {
		s.deniedCost, s.deniedUntil = c.Cost, now+int64(hold(c.Hits[i].Limit, r.RetryAfter))
	}
}

// setView takes r, the store's answer about s's key at at, as s's view.
func (s *slot) setView(r *sluice.HitResult, at int64) {
	s.view, s.viewAt, s.blind = *r, at, false
	s.deniedCost, s.deniedUntil = 0, 0
}

// unsent is the cost admitted here that the store has not recorded yet.
func (s *slot) unsent() int64 { return s.pending + s.inflight }

// budget is what this process may admit on s's key before the next reply:
// what remained at the last one, or its share of it among processes.
func (a *Async) budget(s *slot) int64 {
	if s.blind {
		return s.view.Remaining // first sight: not a reply, not shared
	}
	return (s.view.Remaining + a.processes - 1) / a.processes
}

// denied reports whether a denial by the store of cost on s's key, locked,
// still stands at now.
func (s *slot) denied(cost, now int64) bool {
	return now < s.deniedUntil && cost >= s.deniedCost
}

// isShort reports whether c's cost does not fit in the budget of s,
// locked, while no denial by the store stands on it: only the store knows
// whether it allows.
func (a *Async) isShort(c *sluice.Check, s *slot, now int64) bool {
	return s.unsent()+c.Cost > a.budget(s) && !s.denied(c.Cost, now)
}

// decide decides c from the views of its slots, all locked. It reports
// noView when a view cannot be used (none, too old, computed for another
// limit or shadow flag, or the slot was dropped meanwhile) and short when
// a non-shadow hit does not fit in its budget while no denial by the store
// stands on it, unless force: then only the store knows, and d is not
// written.
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
		shadow := c.Shadow || c.Hits[i].Limit.Shadow
		d.Hits[i] = sluice.HitResult{Allowed: s.unsent()+c.Cost <= a.budget(s), Shadow: shadow}
	}
	d.Conclude(sluice.FromLocalView)
	for i, s := range slots {
		s.lastUse = now
		if d.Allowed && c.Cost > 0 {
			if s.blind {
				a.firstSeen.Add(1)
			}
			a.admit(s, c.Cost, now)
		}
		a.result(s, now, &d.Hits[i])
	}
	return decided
}

// admit adds cost to s's pending cost, queues s, and asks for a flush at
// once when the unsent cost reaches half of the budget. A first-sight
// admission waits for the next round, where keys seen once are sent
// together, up to sluice.MaxHits in one check.
func (a *Async) admit(s *slot, cost, now int64) {
	s.pending += cost
	s.owed.add(cost, now, int64(s.key.hit.Limit.Window))
	a.pending.Add(cost)
	a.enqueue(s)
	if !s.blind && 2*s.unsent() >= a.budget(s) {
		a.urgentFlush(s)
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
		// The store's own wait, which stands; a shadow hit's without one
		// is the next flush.
		if r.RetryAfter = s.view.RetryAfter - age; r.RetryAfter <= 0 {
			r.RetryAfter = a.interval
		}
	}
}

// enqueue puts s, locked, on the queue unless it is there.
func (a *Async) enqueue(s *slot) {
	if s.queued {
		return
	}
	s.queued = true
	a.qmu.Lock()
	a.queue = append(a.queue, s)
	a.qmu.Unlock()
}

// urgentFlush queues s, locked, on the urgent queue, which a kick sends
// at once, unless it is there.
func (a *Async) urgentFlush(s *slot) {
	if s.urgent {
		return
	}
	s.urgent = true
	a.qmu.Lock()
	a.urgent = append(a.urgent, s)
	a.qmu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
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
		a.seen.forget(fp)
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
	// A flush already on its way records after a reset sent now: wait for
	// it (it is bounded by the flush timeout), so the reset forgets it too.
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
