package edge_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

// TestAsyncAsksWithUnsentCost: a one-hit check short on a key whose cost
// admitted here is unsent (its flushes failing) asks the store for that
// cost and its own in one call, without waiting for a flush: allowed, the
// store recorded both; denied, neither, the check is denied, the unsent
// cost is sent at once, and the denial is then repeated locally.
func TestAsyncAsksWithUnsentCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: 10 * time.Minute, Processes: 2})
		c := check(1, hit("k", "12r/h", sluice.Log))
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		mustCheck(t, a, c) // the view: 9 remain, a budget of 4 here (rounded down)
		owe := func(n int) {
			t.Helper()
			f.set(refuse) // flushes fail: the cost stays unsent
			for i := range n {
				var d sluice.Decision
				if err := a.Check(context.Background(), c, &d); err != nil {
					t.Fatalf("local check %d: %v (%+v)", i, err, a.Stats())
				}
				if !d.Allowed || d.Source != sluice.FromLocalView {
					t.Fatalf("local check %d: %+v, want allowed from the view", i, d)
				}
			}
			synctest.Wait()
			f.set(answer)
		}

		owe(4)
		calls := f.calls.Load()
		d := mustCheck(t, a, c)
		if !d.Allowed || d.Source != sluice.FromStore || d.Hits[0].Remaining != 4 {
			t.Fatalf("the check short on 4 unsent: %+v, want allowed by the store, 4 remaining", d)
		}
		if got := f.calls.Load() - calls; got != 1 {
			t.Errorf("%d store calls, want 1 for the unsent cost and the check", got)
		}
		if got := used(t, f.next, c); got != 8 {
			t.Errorf("store's usage: %v, want 8 (3 + 4 unsent + 1)", got)
		}
		if s := a.Stats(); s.Pending != 0 {
			t.Errorf("pending %d, want 0", s.Pending)
		}

		owe(2) // 4 remain, a budget of 2
		var other sluice.Decision
		if err := f.next.Check(context.Background(), check(3, hit("k", "12r/h", sluice.Log)), &other); err != nil || !other.Allowed {
			t.Fatalf("another process's check of 3: %+v, %v", other, err)
		}
		d = mustCheck(t, a, c)
		if d.Allowed || d.Source != sluice.FromStore || d.Hits[0].Remaining != 0 || d.Hits[0].Used != 13 || d.RetryAfter() <= 0 {
			t.Fatalf("the check short on 2 unsent with 1 left: %+v, want denied by the store, counting the 2 (used 13)", d)
		}
		synctest.Wait()
		if got := used(t, f.next, c); got != 12 {
			t.Errorf("store's usage: %v, want 12 (the unsent cost sent after the denial, 1 of it recorded)", got)
		}
		if s := a.Stats(); s.Pending != 0 || s.Unrecorded != 1 {
			t.Errorf("stats %+v, want nothing pending and 1 unrecorded", s)
		}
		calls = f.calls.Load()
		if d := mustCheck(t, a, c); d.Allowed || d.Source != sluice.FromLocalView {
			t.Errorf("the next check: %+v, want denied from the view", d)
		}
		if got := f.calls.Load() - calls; got != 0 {
			t.Errorf("%d store calls while the store's denial stands, want 0", got)
		}
	})
}

// TestAsyncFlushGoesToItsLimiter: with AsyncOptions.Flush, flush calls go
// to it and checks to the limiter the Async is in front of.
func TestAsyncFlushGoesToItsLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		checks := newFlaky(t, nil)
		flushes := &flaky{next: checks.next} // the same store
		a := newAsync(t, checks, edge.AsyncOptions{SyncInterval: 10 * time.Minute, Flush: flushes})
		c := check(1, hit("k", "10r/h", sluice.Log))
		for _, want := range []sluice.Source{sluice.FromStore, sluice.FromStore, sluice.FromStore, sluice.FromLocalView} {
			if d := mustCheck(t, a, c); d.Source != want {
				t.Fatalf("%+v, want from %v", d, want)
			}
		}
		if err := a.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := [2]int64{checks.calls.Load(), flushes.calls.Load()}, [2]int64{3, 1}; got != want {
			t.Errorf("calls to the checks' and the flushes' limiters: %v, want %v", got, want)
		}
		if got := used(t, checks.next, c); got != 4 {
			t.Errorf("store's usage: %v, want 4", got)
		}
	})
}
