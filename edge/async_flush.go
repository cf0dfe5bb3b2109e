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

// run is the coordinating goroutine: one flush round per SyncInterval, or
// at once when a check asks (a key near its budget), never two at once.
// A round sends every queued key's pending cost through the flushers and
// waits for all of them, so a slow store makes rounds longer, each carrying
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
			continue
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
			continue
		case <-a.closeCtx.Done():
		}
		break
	}
	owed := a.pending.Load()
	a.dropped.Add(uint64(max(0, owed)))
	a.pending.Add(-owed)
	a.closeErr = fmt.Errorf("edge: close: %d cost admitted here not sent to the store: %w", owed, a.closeCtx.Err())
}

// batchSlots is the most keys a flusher takes from a round at once; it
// sends those with the same pending cost (and group and shadow flag) in
// checks of up to sluice.MaxHits hits, one store call each.
const batchSlots = 64

// A flushItem is a part of a round: keys, and which queue they came from.
type flushItem struct {
	slots  []*slot
	urgent bool
}

// flushRound sends the pending cost of every queued key (of the urgent
// ones only, if urgentOnly) and refreshes their views.
func (a *Async) flushRound(urgentOnly bool) {
	a.qmu.Lock()
	urgent := a.urgent
	a.urgent = nil
	var regular []*slot
	if !urgentOnly {
		regular = a.queue
		a.queue = nil
	}
	a.qmu.Unlock()
	if len(urgent)+len(regular) == 0 {
		return
	}
	start := a.now()
	a.feed(urgent, true)
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
			urgent := a.urgent
			a.urgent = nil
			a.qmu.Unlock()
			a.feed(urgent, true)
		}
	}
	a.round.Wait()
	took := a.now().Sub(start)
	a.flushes.Add(1)
	a.flushNanos.Add(int64(took))
	a.lastFlush.Store(int64(took))
}

// feed adds slots to the round, one per item.
func (a *Async) feed(slots []*slot, urgent bool) {
	for i := range slots {
		a.round.Add(1)
		a.work <- flushItem{slots: slots[i : i+1], urgent: urgent}
	}
}

// A taken is one key's cost taken for a flush.
type taken struct {
	s     *slot
	key   slotKey // s's key when taken
	p     int64   // the cost sent
	parts owed    // p by age, put back if the flush fails
	now   int64
}

// flushBuf is a flusher's reusable storage.
type flushBuf struct {
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
// and shadow flag together, up to sluice.MaxHits per check; a key alone,
// or whose group the store denies, by itself.
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
				a.sendOne(&ts[i], buf)
			}
		}
		ts = ts[n:]
	}
	clear(all)
	buf.taken = all[:0]
}

// take takes s's pending cost for a flush, reporting false when there is
// nothing to send. Pending cost admitted more than a window ago is
// dropped, not sent (it would count in the wrong window); younger cost is
// sent.
func (a *Async) take(s *slot, urgent bool) (taken, bool) {
	now := a.mono()
	s.mu.Lock()
	defer s.mu.Unlock()
	if urgent {
		s.urgent = false
	} else {
		s.queued = false
	}
	if s.flushing {
		// The key is on both queues and its other flush is under way:
		// one answer at a time, or a view would miss cost in flight.
		a.enqueue(s)
		return taken{}, false
	}
	if dropped := s.owed.dropOlder(now, int64(s.key.hit.Limit.Window)); dropped > 0 {
		a.dropped.Add(uint64(dropped))
		a.pending.Add(-dropped)
		s.pending -= dropped
	}
	if s.pending == 0 {
		return taken{}, false
	}
	t := taken{s: s, key: s.key, p: s.pending, parts: s.owed, now: now}
	s.pending, s.owed, s.inflight, s.flushing = 0, owed{}, t.p, true
	return t, true
}

// sendGroup sends ts, which share cost, group and shadow flag, in one
// check. It reports false, having recorded nothing, when the check cannot
// be sent as one (the keys share state) or the store denies it: each key
// is then sent alone.
func (a *Async) sendGroup(ts []taken, buf *flushBuf) bool {
	buf.hits = buf.hits[:0]
	for i := range ts {
		buf.hits = append(buf.hits, ts[i].key.hit)
	}
	c := sluice.Check{Hits: buf.hits, Cost: ts[0].p, Group: ts[0].key.group, Shadow: ts[0].key.shadow}
	if c.Validate() != nil {
		return false
	}
	err := a.call(c, &buf.d)
	if err == nil && !buf.d.Allowed {
		return false
	}
	for i := range ts {
		var r *sluice.HitResult
		if err == nil {
			r = &buf.d.Hits[i]
		}
		a.finish(&ts[i], ts[i].p, err, r)
	}
	return true
}

// sendOne sends t by itself.
func (a *Async) sendOne(t *taken, buf *flushBuf) {
	buf.hits = append(buf.hits[:0], t.key.hit)
	c := sluice.Check{Hits: buf.hits, Group: t.key.group, Shadow: t.key.shadow, Cost: min(t.p, t.key.hit.Limit.Rate)}
	recorded, err := a.send(c, &buf.d)
	var r *sluice.HitResult
	if err == nil {
		r = &buf.d.Hits[0]
	}
	a.finish(t, recorded, err, r)
}

// finish ends t's flush: on success r, the store's answer, becomes the
// view; on failure the cost is owed again and the key queued. Those
// waiting for the flush are woken.
func (a *Async) finish(t *taken, recorded int64, err error, r *sluice.HitResult) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight, s.flushing = 0, false
	s.broadcast()
	if err != nil && s.dead {
		// The key was reset or swept while its cost was in flight: what it
		// owed is forgotten with it, not owed by anyone.
		a.pending.Add(-t.p)
		return
	}
	if err != nil {
		s.pending += t.p
		s.owed.restore(t.parts) // older than any admitted since
		a.enqueue(s)
		return
	}
	a.pending.Add(-t.p)
	a.unrecorded.Add(uint64(t.p - recorded))
	if (t.now >= s.viewAt || s.blind) && t.key.hit.Limit == s.key.hit.Limit {
		s.setView(r, t.now)
		if recorded < t.p {
			// The key is full, and this process admitted more than the
			// store took: nothing remains for it until a reply says so.
			s.view.Remaining = 0
		}
	}
}

// maxFillAttempts bounds the calls of one flush to a key that is nearly
// full.
const maxFillAttempts = 4

// send makes the store calls of one flush and returns the cost recorded.
// A store that denies the cost is nearly full: nothing was recorded, so
// what fits (its Remaining) is sent again, up to maxFillAttempts calls in
// all, and the rest is over-admission that cannot be recorded
// (AsyncStats.Unrecorded). A decision not made by the store (a Guard's
// failure policy) is a failure: the cost is still owed.
func (a *Async) send(c sluice.Check, d *sluice.Decision) (recorded int64, err error) {
	if err := a.call(c, d); err != nil {
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
		if err := a.call(c, d); err != nil {
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
// store's coalesced script calls) ahead of those checks.
func (a *Async) call(c sluice.Check, d *sluice.Decision) error {
	if a.asking.Load() > 0 {
		a.callMu.Lock()
		defer a.callMu.Unlock()
	}
	ctx, cancel := context.WithTimeout(a.callCtx, a.timeout)
	defer cancel()
	a.flushCalls.Add(1)
	err := a.next.Check(ctx, c, d)
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

// sweep forgets the keys idle for longer than MaxViewAge with nothing
// owed, measures the age of the views in use, and clears the filter of
// keys seen once it is full. A key is judged and removed under one hold
// of its lock, so a check cannot add cost between.
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
	a.seen.clearIfFull()
}

// Flush runs a flush round now, sending what every key owes, and returns
// when it is over (or when ctx ends, with ctx's error). Cost that fails to
// be sent stays owed. After Close it returns nil at once.
func (a *Async) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case a.flushNow <- done:
	case <-a.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("edge: flush: %w", ctx.Err())
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("edge: flush: %w", ctx.Err())
	}
}

// Close stops the flushers after sending everything owed, waiting for the
// store until ctx ends; then the flush calls under way are canceled, and
// what is still owed is dropped (counted in AsyncStats.Dropped) and Close
// returns an error saying how much. Checks made after Close go to the
// store synchronously. Close is safe to call more than once; later calls
// return the first's result.
func (a *Async) Close(ctx context.Context) error {
	a.once.Do(func() {
		a.closed.Store(true)
		// Checks that saw the limiter open finish first: their cost is in
		// the queue before the last rounds.
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

// A BatchRecorder adds the cost of many checks to their state without
// deciding them. Each check has one hit and a cost > 0. RecordBatch sets
// recorded[i] to the cost recorded for checks[i] (its Cost, or less, down
// to 0, where the state had no room for it), to -1 when the store cannot
// record it and never will, or to any value below -1 when it was not sent
// (its call failed). created, when not nil, has created[i] set when
// checks[i]'s record created its key's state. The Redis store implements
// it, and a Guard passes it through (errors.ErrUnsupported when its store
// does not).
type BatchRecorder interface {
	RecordBatch(ctx context.Context, checks []sluice.Check, recorded []int64, created []bool) error
}

// errNoBatch is a Guard's RecordBatch error when its store does not record
// in batches.
var errNoBatch = fmt.Errorf("edge: record: the store does not record in batches: %w", errors.ErrUnsupported)
