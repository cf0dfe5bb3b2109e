package edge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// run is the coordinating goroutine: a flush round per SyncInterval, or
// at once for keys near their budget, never two at once. A round waits
// for all its calls, so a slow store makes rounds longer, each carrying
// more cost per key, rather than piling calls up.
func (a *Async) run() {
	defer close(a.done)
	t := time.NewTicker(a.interval)
	defer t.Stop()
	lastSweep := a.mono()
	for {
		select {
		case <-a.closing:
			a.drain(t)
			close(a.work)
			return
		case <-t.C:
			a.flushRound(false)
		case <-a.kick:
			a.flushRound(true)
		case done := <-a.flushNow:
			a.flushRound(false)
			close(done)
		}
		if now := a.mono(); time.Duration(now-lastSweep) >= time.Second {
			a.sweep(now)
			lastSweep = now
		}
	}
}

// drain runs rounds until nothing is owed or Close's context ends; then
// whatever is still owed is dropped and counted.
func (a *Async) drain(t *time.Ticker) {
	for {
		a.flushRound(false)
		a.qmu.Lock()
		left := len(a.queue) + len(a.urgent)
		a.qmu.Unlock()
		if left == 0 {
			return
		}
		select {
		case <-t.C:
		case <-a.closeCtx.Done():
			owed := a.pending.Load()
			a.dropped.Add(uint64(max(0, owed)))
			a.pending.Add(-owed)
			a.closeErr = fmt.Errorf("edge: close: %d cost admitted here not sent to the store: %w", owed, a.closeCtx.Err())
			return
		}
	}
}

const batchSlots = 64 // the most keys a flusher takes at once

// A flushItem is keys of a round, and whether they came from the urgent
// queue.
type flushItem struct {
	slots  []*slot
	urgent bool
}

// flushRound sends the pending cost of every queued key (of the urgent
// ones only, if urgentOnly).
func (a *Async) flushRound(urgentOnly bool) {
	var regular []*slot
	a.qmu.Lock()
	urgent := a.urgent
	if a.urgent = nil; !urgentOnly {
		regular, a.queue = a.queue, nil
	}
	a.qmu.Unlock()
	if len(urgent)+len(regular) == 0 {
		return
	}
	start := a.now()
	a.feedUrgent(urgent)
	for len(regular) > 0 {
		n := min(batchSlots, len(regular))
		a.round.Add(1)
		select {
		case a.work <- flushItem{slots: regular[:n]}:
			regular = regular[n:]
		case <-a.kick:
			// A key near its budget does not wait for a long round.
			a.round.Done()
			a.qmu.Lock()
			urgent, a.urgent = a.urgent, nil
			a.qmu.Unlock()
			a.feedUrgent(urgent)
		}
	}
	a.round.Wait()
	took := a.now().Sub(start)
	a.flushes.Add(1)
	a.flushNanos.Add(int64(took))
	a.lastFlush.Store(int64(took))
}

// feedUrgent adds urgent slots to the round, one per item.
func (a *Async) feedUrgent(slots []*slot) {
	for i := range slots {
		a.round.Add(1)
		a.work <- flushItem{slots: slots[i : i+1], urgent: true}
	}
}

// A taken is one key's cost p taken for a flush, with its parts by age.
type taken struct {
	s      *slot
	key    slotKey
	p, now int64
	parts  owed
}

type flushBuf struct { // a flusher's own storage
	taken []taken
	hits  []sluice.Hit
	d     sluice.Decision
}

// flusher sends the items of rounds.
func (a *Async) flusher() {
	var buf flushBuf
	for it := range a.work {
		a.flushItem(it, &buf)
		a.round.Done()
	}
}

// flushItem sends what the keys of it owe: keys with the same cost, group
// and shadow flag together, up to sluice.MaxHits per check; the others,
// or a group the store denies, one by one.
func (a *Async) flushItem(it flushItem, buf *flushBuf) {
	ts := buf.taken[:0]
	for _, s := range it.slots {
		if t, ok := a.take(s, it.urgent); ok {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(x, y taken) int {
		return cmp.Or(cmp.Compare(x.p, y.p), strings.Compare(x.key.group, y.key.group), cmp.Compare(btou(x.key.shadow), btou(y.key.shadow)))
	})
	all := ts
	for len(ts) > 0 {
		n := 1
		for n < len(ts) && n < sluice.MaxHits && ts[n].p == ts[0].p && ts[n].key.group == ts[0].key.group && ts[n].key.shadow == ts[0].key.shadow {
			n++
		}
		if n == 1 || !a.sendGroup(ts[:n], buf) {
			for i := range ts[:n] {
				t := &ts[i]
				buf.hits = append(buf.hits[:0], t.key.hit)
				c := sluice.Check{Hits: buf.hits, Group: t.key.group, Shadow: t.key.shadow, Cost: min(t.p, t.key.hit.Limit.Rate)}
				recorded, err := a.send(c, &buf.d, it.urgent)
				a.finish(t, recorded, err, &buf.d, 0)
			}
		}
		ts = ts[n:]
	}
	clear(all)
	buf.taken = all[:0]
}

// take takes s's pending cost for a flush, reporting false when there is
// nothing to send. Cost admitted more than a window ago is dropped (it
// would count in the wrong window).
func (a *Async) take(s *slot, urgent bool) (taken, bool) {
	now := a.mono()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.urgent, s.queued = s.urgent && !urgent, s.queued && urgent // off its queue
	if s.flushing {
		a.enqueue(s, false) // one flush of a key at a time
		return taken{}, false
	}
	return a.takeLocked(s, now)
}

// takeLocked takes the pending cost of s, locked, with no flush of it
// under way, reporting false when there is nothing to send.
func (a *Async) takeLocked(s *slot, now int64) (taken, bool) {
	if dropped := s.owed.dropOlder(now, int64(s.key.hit.Limit.Window)); dropped > 0 {
		a.dropped.Add(uint64(dropped))
		a.pending.Add(-dropped)
		s.pending -= dropped
	}
	if s.pending == 0 {
		s.broadcast() // those waiting for a flush of cost dropped or reset
		return taken{}, false
	}
	t := taken{s: s, key: s.key, p: s.pending, parts: s.owed, now: now}
	s.pending, s.owed, s.inflight, s.flushing = 0, owed{}, t.p, true
	return t, true
}

// sendGroup sends ts, which share cost, group and shadow flag, in one
// check. It reports false, having recorded nothing, when the keys share a
// state or the store denies the check.
func (a *Async) sendGroup(ts []taken, buf *flushBuf) bool {
	buf.hits = buf.hits[:0]
	for i := range ts {
		buf.hits = append(buf.hits, ts[i].key.hit)
	}
	c := sluice.Check{Hits: buf.hits, Cost: ts[0].p, Group: ts[0].key.group, Shadow: ts[0].key.shadow}
	if c.Validate() != nil {
		return false
	}
	err := a.call(c, &buf.d, false)
	if err == nil && !buf.d.Allowed {
		return false
	}
	for i := range ts {
		a.finish(&ts[i], ts[i].p, err, &buf.d, i)
	}
	return true
}

// finish ends t's flush: on success hit i of d, the store's answer,
// becomes the view; on failure the cost is owed again.
func (a *Async) finish(t *taken, recorded int64, err error, d *sluice.Decision, i int) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	a.finishLocked(t, recorded, err, d, i)
}

// finishLocked is finish with t's slot locked.
func (a *Async) finishLocked(t *taken, recorded int64, err error, d *sluice.Decision, i int) {
	s := t.s
	s.inflight, s.flushing = 0, false
	s.broadcast()
	if err != nil && s.dead {
		a.pending.Add(-t.p) // reset while in flight: forgotten
		return
	}
	if err != nil {
		s.pending += t.p
		s.owed.restore(t.parts) // older than any admitted since
		a.enqueue(s, false)
		return
	}
	a.pending.Add(-t.p)
	a.unrecorded.Add(uint64(t.p - recorded))
	if t.now >= s.viewAt && t.key.hit.Limit == s.key.hit.Limit {
		s.setView(&d.Hits[i], t.now)
		if recorded < t.p {
			s.view.Remaining = 0 // full, and more admitted than recorded
		}
	}
}

// maxFillAttempts bounds the calls of one flush to a nearly full key.
const maxFillAttempts = 4

// send makes the store calls of one flush and returns the cost recorded.
// A denial recorded nothing: what fits (its Remaining) is sent again, up
// to maxFillAttempts calls, and the rest is over-admission that cannot be
// recorded (AsyncStats.Unrecorded).
func (a *Async) send(c sluice.Check, d *sluice.Decision, urgent bool) (recorded int64, err error) {
	if err := a.call(c, d, urgent); err != nil {
		return 0, err
	}
	want := c.Cost
	for attempt := 1; !d.Allowed && attempt < maxFillAttempts; attempt++ {
		r := min(d.Hits[0].Remaining, want-recorded)
		if r <= 0 {
			break
		}
		c.Cost = r
		last := *d
		last.Hits = append([]sluice.HitResult(nil), d.Hits...)
		if err := a.call(c, d, urgent); err != nil {
			*d = last // the last answer is the view
			break
		}
		if d.Allowed {
			recorded += r
		}
	}
	if d.Allowed && recorded == 0 {
		recorded = want
	}
	return recorded, nil
}

// errDegraded marks a flush decided by a failure policy, not by the store.
var errDegraded = errors.New("decided without the store")

// call makes one store call of a flush. While checks wait on the store,
// flush calls go one at a time: a flush is never in a hurry, and the
// calls of a round would otherwise sit in the store's queue (the Redis
// store's coalesced script calls) ahead of those checks. An urgent one (of
// one key near its budget, which checks of the key may be waiting for) is
// one of those checks' kind, and does not wait for the others.
func (a *Async) call(c sluice.Check, d *sluice.Decision, urgent bool) error {
	if !urgent && a.asking.Load() > 0 {
		a.oneCall <- struct{}{}
		defer func() { <-a.oneCall }()
	}
	ctx, cancel := context.WithTimeout(a.callCtx, a.timeout)
	defer cancel()
	a.flushCalls.Add(1)
	err := a.flushTo.Check(ctx, c, d)
	if err == nil && (d.Source != sluice.FromStore || len(d.Hits) != len(c.Hits)) {
		err = fmt.Errorf("%w: %w (%v)", sluice.ErrUnavailable, errDegraded, d.Source)
	}
	if err != nil {
		a.flushErrs.Add(1)
		if ok, suppressed := a.logs.allow(); ok {
			a.log.Warn("edge: async flush failed; the cost stays owed", "error", err.Error(), "suppressed", suppressed)
		}
	}
	return err
}

// sweep forgets the keys idle for longer than MaxViewAge that owe
// nothing (judged and removed under one hold of the key's lock, so no
// cost is added between), and measures the age of the views in use.
func (a *Async) sweep(now int64) {
	var oldest int64
	for i := range a.shards {
		sh := &a.shards[i]
		sh.mu.Lock()
		for _, s := range sh.m {
			s.mu.Lock()
			idle := time.Duration(now - s.lastUse)
			owes := s.pending > 0 || s.inflight > 0 || s.queued || s.urgent || s.flushing || s.asking
			if idle < time.Second && s.viewAt > 0 {
				oldest = max(oldest, now-s.viewAt)
			}
			removed := !owes && idle > a.maxViewAge
			if removed {
				a.remove(sh, s)
			}
			s.mu.Unlock()
			if removed && a.sweepHook != nil {
				a.sweepHook(s)
			}
		}
		sh.mu.Unlock()
	}
	a.viewAge.Store(oldest)
}

// Flush runs a flush round now and returns when it is over, or ctx's
// error. Cost that fails to be sent stays owed. After Close it returns
// nil at once.
func (a *Async) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case a.flushNow <- done:
		select {
		case <-done:
			return nil
		case <-ctx.Done():
		}
	case <-a.done:
		return nil
	case <-ctx.Done():
	}
	return fmt.Errorf("edge: flush: %w", ctx.Err())
}

// Close stops the flushers after sending everything owed, waiting for the
// store until ctx ends; then the calls under way are canceled, what is
// still owed is dropped (AsyncStats.Dropped), and Close returns an error
// saying how much. Checks after Close go to the store. Later calls return
// the first's result.
func (a *Async) Close(ctx context.Context) error {
	a.once.Do(func() {
		a.closed.Store(true)
		// Checks under way queue their cost before the last rounds.
		if a.active.Load() > 0 {
			select {
			case <-a.idle:
			case <-ctx.Done():
			}
		}
		stop := context.AfterFunc(ctx, a.cancelCalls)
		defer stop()
		a.closeCtx = ctx
		close(a.closing)
		<-a.done
		a.cancelCalls()
	})
	<-a.done
	return a.closeErr
}
