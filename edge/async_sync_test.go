package edge_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

// TestAsyncShortWindowGoesToTheStore: a hit whose window is not longer than
// SyncInterval is decided by the store, so no admitted cost is dropped (sent
// a round later, it would count in the next window, or be dropped as older
// than it): 10 checks of 10 per window admitted and recorded, the 11th
// denied, nothing dropped, no slot; so is a check of such a hit and
// another.
func TestAsyncShortWindowGoesToTheStore(t *testing.T) {
	for _, window := range []time.Duration{500 * time.Millisecond, time.Second} {
		t.Run(window.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFlaky(t, nil)
				a := newAsync(t, f, edge.AsyncOptions{SyncInterval: time.Second})
				short := sluice.Hit{Key: "k", Limit: sluice.Limit{Rate: 10, Window: window, Algorithm: sluice.Log}}
				c := check(1, short)
				for i := range 11 {
					d := mustCheck(t, a, c)
					if d.Source != sluice.FromStore || d.Allowed != (i < 10) {
						t.Fatalf("check %d: %+v, want decided by the store, allowed %v", i+1, d, i < 10)
					}
				}
				if got := used(t, f.next, c); got != 10 {
					t.Errorf("the store holds %v, want the 10 admitted", got)
				}
				both := check(1, hit("long", "100r/h", sluice.Log), short)
				for range 3 {
					if d := mustCheck(t, a, both); d.Source != sluice.FromStore {
						t.Errorf("a check with a short window: %+v, want decided by the store", d)
					}
				}
				time.Sleep(2 * time.Second)
				synctest.Wait()
				if s := a.Stats(); s.Dropped != 0 || s.Local != 0 || s.Keys != 0 || s.Sync != 14 {
					t.Errorf("stats %+v, want 14 synchronous decisions, none local or dropped, no slot", s)
				}
			})
		})
	}
}

// inflight passes checks to next, counting the calls under way (most: the
// most at once), each taking a millisecond; a check of the key "asked"
// waits until release is closed.
type inflight struct {
	next             sluice.Limiter
	started, release chan struct{}
	mu               sync.Mutex
	now, most        int
}

func (l *inflight) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if c.Hits[0].Key == "asked" {
		close(l.started)
		<-l.release
		return l.next.Check(ctx, c, d)
	}
	l.mu.Lock()
	l.now++
	l.most = max(l.most, l.now)
	l.mu.Unlock()
	time.Sleep(time.Millisecond)
	l.mu.Lock()
	l.now--
	l.mu.Unlock()
	return l.next.Check(ctx, c, d)
}

func (l *inflight) Reset(ctx context.Context, c sluice.Check) error { return l.next.Reset(ctx, c) }

// TestAsyncFlushesYieldToWaitingChecks: a flush round makes its store calls
// Flushers at a time, but one at a time while a check waits on the store,
// so that a key's first checks do not queue behind a round's calls (the
// Redis store sends the calls in its queue together, in one script call
// whose timeout is theirs).
func TestAsyncFlushesYieldToWaitingChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &inflight{next: newMemstore(t, nil), started: make(chan struct{}), release: make(chan struct{})}
		a := newAsync(t, l, edge.AsyncOptions{SyncInterval: 10 * time.Minute})
		keys := make([]sluice.Check, 300) // 5 flush items of up to 64 keys
		owe := func() {
			for i := range keys {
				// Costs that differ, so that each key is sent by itself.
				c := keys[i]
				c.Cost = int64(i%50 + 1)
				if d := mustCheck(t, a, c); d.Source != sluice.FromLocalView {
					t.Fatalf("key %d: %+v, want decided locally", i, d)
				}
			}
		}
		for i := range keys {
			keys[i] = check(1, hit(fmt.Sprint("k", i), "1000r/h", sluice.SlidingWindow))
			mustCheck(t, a, keys[i])
			mustCheck(t, a, keys[i])
			mustCheck(t, a, keys[i]) // the key's view
		}
		owe()
		l.most = 0
		if err := a.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if l.most < 2 {
			t.Errorf("a round with no check waiting made %d calls at once, want several", l.most)
		}

		owe()
		asked := make(chan error, 1)
		go func() {
			var d sluice.Decision
			asked <- a.Check(context.Background(), check(1, hit("asked", "1r/h", sluice.Log)), &d)
		}()
		<-l.started
		l.mu.Lock()
		l.most = 0
		l.mu.Unlock()
		if err := a.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if l.most != 1 {
			t.Errorf("a round while a check waited on the store made %d calls at once, want 1", l.most)
		}
		close(l.release)
		if err := <-asked; err != nil {
			t.Fatal(err)
		}
		if s := a.Stats(); s.Pending != 0 || s.FlushErrors != 0 {
			t.Errorf("stats %+v, want everything sent", s)
		}
	})
}
