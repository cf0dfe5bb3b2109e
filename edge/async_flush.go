package edge

import (
	"context"
	"errors"
	"fmt"
	"runtime"
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

// A flushItem is one slot of a round, and which queue it came from.
type flushItem struct {
	s      *slot
	urgent bool
}

// flushRound sends the pending cost of every queued key (of the urgent
// ones only, if urgentOnly) and refreshes their views.
func (a *Async) flushRound(urgentOnly bool) {
	a.qmu.Lock()
	urgent := a.urgent
	a.urgent = a.spare[1][:0]
	var regular []*slot
	if !urgentOnly {
		regular = a.queue
		a.queue = a.spare[0][:0]
	}
	a.qmu.Unlock()
	if len(urgent)+len(regular) > 0 {
		start := a.now()
		a.round.Add(len(urgent) + len(regular))
		for _, s := range urgent {
			a.work <- flushItem{s, true}
		}
		for _, s := range regular {
			select {
			case a.work <- flushItem{s, false}:
				continue
			case <-a.kick:
				// A key near its budget does not wait for a long round.
				a.feedUrgent()
			}
			a.work <- flushItem{s, false}
		}
		a.round.Wait()
		took := a.now().Sub(start)
		a.flushes.Add(1)
		a.flushNanos.Add(int64(took))
		a.lastFlush.Store(int64(took))
	}
	clear(urgent)
	a.spare[1] = urgent[:0]
	if !urgentOnly {
		clear(regular)
		a.spare[0] = regular[:0]
	}
}

// feedUrgent adds the urgent keys queued since the round began to it.
func (a *Async) feedUrgent() {
	a.qmu.Lock()
	urgent := a.urgent
	a.urgent = nil
	a.qmu.Unlock()
	a.round.Add(len(urgent))
	for _, s := range urgent {
		a.work <- flushItem{s, true}
	}
}

// flusher sends the slots of a round, one store call (or two) each.
func (a *Async) flusher() {
	var d sluice.Decision
	hits := make([]sluice.Hit, 1)
	for it := range a.work {
		a.flush(it, hits, &d)
		a.round.Done()
	}
}

// flush sends s's pending cost and takes the reply as its view. On a store
// failure the cost stays owed and s is queued again for the next round.
func (a *Async) flush(it flushItem, hits []sluice.Hit, d *sluice.Decision) {
	s, now := it.s, a.mono()
	s.mu.Lock()
	if it.urgent {
		s.urgent = false
	} else {
		s.queued = false
	}
	if s.flushing {
		// The key is on both queues and its other flush is under way:
		// one answer at a time, or a view would miss cost in flight.
		a.enqueue(s)
		s.mu.Unlock()
		return
	}
	if s.pending > 0 && time.Duration(now-s.pendingSince) > s.key.hit.Limit.Window {
		// Owed for longer than a window: sent now, it would count in the
		// wrong window.
		a.dropped.Add(uint64(s.pending))
		a.pending.Add(-s.pending)
		s.pending = 0
	}
	p, refresh, since := s.pending, s.refresh, s.pendingSince
	if p == 0 && !refresh {
		s.mu.Unlock()
		return
	}
	s.pending, s.inflight, s.refresh, s.flushing = 0, p, false, true
	s.mu.Unlock()
	hits[0] = s.key.hit
	c := sluice.Check{Hits: hits, Group: s.key.group, Shadow: s.key.shadow, Cost: min(p, s.key.hit.Limit.Rate)}
	recorded, err := a.send(c, d)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight, s.flushing = 0, false
	if err != nil {
		if p > 0 {
			s.pending += p
			s.pendingSince = since // older than any admitted since
		}
		s.refresh = s.refresh || refresh
		if !s.dead {
			a.enqueue(s)
		}
		return
	}
	a.pending.Add(-p)
	a.unrecorded.Add(uint64(p - recorded))
	if now >= s.viewAt {
		s.setView(&d.Hits[0], now)
		if recorded < p {
			// The key is full, and this process admitted more than the
			// store took: nothing remains for it until a refresh says so.
			s.remaining = 0
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

func (a *Async) call(c sluice.Check, d *sluice.Decision) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	a.flushCalls.Add(1)
	err := a.next.Check(ctx, c, d)
	if err == nil && (d.Source != sluice.FromStore || len(d.Hits) != 1) {
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
// owed, and measures the age of the views in use.
func (a *Async) sweep(now int64) {
	var oldest int64
	for i := range a.shards {
		sh := &a.shards[i]
		sh.mu.Lock()
		for _, s := range sh.m {
			s.mu.Lock()
			idle := time.Duration(now - s.lastUse)
			owes := s.pending > 0 || s.inflight > 0 || s.queued || s.urgent
			if idle < time.Second && s.viewAt > 0 {
				oldest = max(oldest, now-s.viewAt)
			}
			s.mu.Unlock()
			if !owes && idle > a.maxViewAge {
				a.remove(sh, s)
			}
		}
		sh.mu.Unlock()
	}
	a.viewAge.Store(oldest)
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
// store until ctx ends; what is still owed then is dropped (counted in
// AsyncStats.Dropped) and Close returns an error saying how much. Checks
// made after Close go to the store synchronously. Close is safe to call
// more than once; later calls return the first's result.
func (a *Async) Close(ctx context.Context) error {
	a.once.Do(func() {
		a.closed.Store(true)
		// Checks that saw the limiter open finish first: their cost is in
		// the queue before the last rounds.
		for a.active.Load() > 0 {
			runtime.Gosched()
		}
		a.closeCtx = ctx
		close(a.closing)
	})
	<-a.done
	return a.closeErr
}
