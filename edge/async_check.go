package edge

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

// Check implements sluice.Limiter. When every hit's key has a view younger
// than MaxViewAge, the check is decided locally (Source
// sluice.FromLocalView): a non-shadow hit allows if the cost admitted here
// and not yet recorded by the store, plus c.Cost, fits in what the view
// says remains (or this process's share of it, see Processes). An allowed
// check's cost is added to each key's pending cost, which the flushers
// send. Otherwise the check goes to the store synchronously, and the
// store's reply becomes the keys' view. After Close every check goes to
// the store.
func (a *Async) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("edge: check: %w", err)
	}
	a.active.Add(1)
	defer a.active.Add(-1)
	if a.closed.Load() {
		return a.next.Check(ctx, c, d)
	}
	now := a.mono()
	var slots [sluice.MaxHits]*slot
	for i := range c.Hits {
		k := slotKey{hit: c.Hits[i], group: c.Group, shadow: c.Shadow}
		if slots[i] = a.slot(a.fingerprint(&k)); slots[i] == nil {
			return a.checkSync(ctx, c, d, now)
		}
	}
	if !a.decide(&c, slots[:len(c.Hits)], now, d) {
		return a.checkSync(ctx, c, d, now)
	}
	a.local.Add(1)
	return nil
}

// mono returns the time since the limiter's base, in nanoseconds: always
// > 0, so that 0 can mean "never".
func (a *Async) mono() int64 { return int64(a.clock()) }

// checkSync passes c to the store and takes its reply as the view of c's
// keys.
func (a *Async) checkSync(ctx context.Context, c sluice.Check, d *sluice.Decision, now int64) error {
	a.sync.Add(1)
	if err := a.next.Check(ctx, c, d); err != nil {
		return err
	}
	if d.Source != sluice.FromStore || len(d.Hits) != len(c.Hits) {
		return nil // a degraded decision says nothing of the shared usage
	}
	full := false
	for i := range c.Hits {
		k := slotKey{hit: c.Hits[i], group: c.Group, shadow: c.Shadow}
		s := a.addSlot(&k, a.fingerprint(&k))
		if s == nil {
			full = true
			continue
		}
		s.mu.Lock()
		if now >= s.viewAt {
			s.setView(&d.Hits[i], now)
		}
		s.lastUse = now
		s.mu.Unlock()
	}
	if full {
		a.overflow.Add(1)
	}
	return nil
}

// setView takes r, the store's answer about s's key at at, as s's view.
func (s *slot) setView(r *sluice.HitResult, at int64) {
	s.remaining, s.used = r.Remaining, r.Used
	s.retryAfter, s.resetAfter = r.RetryAfter, r.ResetAfter
	s.viewAt = at
}

// unsent is the cost admitted here that the store has not recorded yet.
func (s *slot) unsent() int64 { return s.pending + s.inflight }

// budget is what this process may admit on s's key before the next reply:
// what remained at the last one, or its share of it among processes.
func (s *slot) budget(processes int64) int64 {
	return (s.remaining + processes - 1) / processes
}

// decide decides c from the views of its slots, with every slot locked, and
// reports false when a view cannot be used (none, too old, or the slot was
// dropped meanwhile).
func (a *Async) decide(c *sluice.Check, slots []*slot, now int64, d *sluice.Decision) bool {
	order := lockOrder(slots)
	for _, i := range order {
		slots[i].mu.Lock()
	}
	defer func() {
		for _, i := range order {
			slots[i].mu.Unlock()
		}
	}()
	for _, s := range slots {
		if s.dead || s.viewAt == 0 || time.Duration(now-s.viewAt) > a.maxViewAge {
			return false
		}
	}
	d.Prepare(len(slots))
	for i, s := range slots {
		shadow := c.Shadow || c.Hits[i].Limit.Shadow
		fits := s.unsent()+c.Cost <= s.budget(a.processes)
		d.Hits[i] = sluice.HitResult{Allowed: fits, Shadow: shadow}
	}
	d.Conclude(sluice.FromLocalView)
	for i, s := range slots {
		s.lastUse = now
		if d.Allowed && c.Cost > 0 {
			a.admit(s, c.Cost, now)
		} else if !d.Allowed && time.Duration(now-s.viewAt) >= a.interval {
			s.refresh = true // a denied key learns of its refill within an interval
			a.enqueue(s)
		}
		a.result(s, now, &d.Hits[i])
	}
	return true
}

// admit adds cost to s's pending cost, queues s, and asks for a flush at
// once when the unsent cost reaches half of the budget.
func (a *Async) admit(s *slot, cost, now int64) {
	if s.pending == 0 {
		s.pendingSince = now
	}
	s.pending += cost
	a.pending.Add(cost)
	a.enqueue(s)
	if 2*s.unsent() >= s.budget(a.processes) && !s.urgent {
		s.urgent = true
		a.qmu.Lock()
		a.urgent = append(a.urgent, s)
		a.qmu.Unlock()
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// result fills r, whose Allowed and Shadow are set, from s's view.
func (a *Async) result(s *slot, now int64, r *sluice.HitResult) {
	age := time.Duration(now - s.viewAt)
	unsent := s.unsent()
	r.Used = s.used + float64(unsent)
	r.Remaining = max(0, s.remaining-unsent)
	r.ResetAfter = max(0, s.resetAfter-age)
	if !r.Allowed {
		// The store's own wait if it denied; else the next refresh.
		r.RetryAfter = max(s.retryAfter-age, a.interval)
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

// Reset implements sluice.Limiter: it forgets c's keys here, their pending
// cost included (a reset forgets usage), then resets them in the store.
func (a *Async) Reset(ctx context.Context, c sluice.Check) error {
	removed := make([]*slot, 0, len(c.Hits))
	for i := range c.Hits {
		k := slotKey{hit: c.Hits[i], group: c.Group, shadow: c.Shadow}
		fp := a.fingerprint(&k)
		sh := a.shard(fp)
		sh.mu.Lock()
		if s := sh.m[fp]; s != nil {
			a.remove(sh, s)
			removed = append(removed, s)
		}
		sh.mu.Unlock()
	}
	// A flush already on its way records after a reset sent now: wait for
	// it (it is bounded by the flush timeout), so the reset forgets it too.
	for _, s := range removed {
		for ctx.Err() == nil && s.isFlushing() {
			time.Sleep(100 * time.Microsecond)
		}
	}
	return a.next.Reset(ctx, c)
}

func (s *slot) isFlushing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushing
}

// remove deletes s from sh, whose lock is held, and marks it dead so that a
// check holding it goes to the store.
func (a *Async) remove(sh *asyncShard, s *slot) {
	s.mu.Lock()
	s.dead = true
	a.pending.Add(-s.pending)
	s.pending = 0
	s.mu.Unlock()
	delete(sh.m, s.fp)
	a.keys.Add(-1)
	a.bytes.Add(-keyBytes(&s.key))
}
