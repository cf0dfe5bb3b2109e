package edge_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

// TestAsyncKeySeenOnceHasNoSlot: with FirstSight 0, a key checked once is
// decided by the store and leaves no slot (its answer is kept in the seen
// table, no heap object); its second check makes the slot from that
// answer and is decided locally, without another store call, as before.
func TestAsyncKeySeenOnceHasNoSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: 100 * time.Millisecond})
		for k := range 100 {
			c := check(1, hit(fmt.Sprint("once-", k), "10r/h", sluice.Log))
			if d := mustCheck(t, a, c); !d.Allowed || d.Source != sluice.FromStore {
				t.Fatalf("key %d: %+v, want allowed by the store", k, d)
			}
		}
		if s := a.Stats(); s.Keys != 0 || s.Sync != 100 || s.Overflow != 0 {
			t.Fatalf("after 100 keys checked once: %+v, want no slot, 100 sync checks", s)
		}
		c := check(1, hit("once-7", "10r/h", sluice.Log))
		calls := f.calls.Load()
		for i := 2; i <= 3; i++ {
			d := mustCheck(t, a, c)
			if !d.Allowed || d.Source != sluice.FromLocalView {
				t.Fatalf("check %d of a key seen once: %+v, want allowed from the local view", i, d)
			}
			if got, want := d.Hits[0].Remaining, int64(10-i); got != want {
				t.Errorf("check %d: Remaining %d, want %d", i, got, want)
			}
		}
		if got := f.calls.Load() - calls; got != 0 {
			t.Errorf("%d store calls for the second and third checks, want 0", got)
		}
		if s := a.Stats(); s.Keys != 1 || s.Local != 2 || s.Sync != 100 {
			t.Errorf("stats %+v, want 1 slot, 2 local decisions, 100 sync", s)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := used(t, f.next, c); got != 3 {
			t.Errorf("store's usage after one interval: %v, want 3", got)
		}
	})
}

// TestAsyncSeenDenialHolds: a key whose only check the store denied is
// denied locally on its next checks while that denial stands (the seen
// table keeps the hold, as a slot would), then asked again.
func TestAsyncSeenDenialHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: time.Second})
		c := check(1, hit("k", "2r/m", sluice.Log))
		mustCheck(t, f.next, c)
		mustCheck(t, f.next, c) // full in the store, not through a
		if d := mustCheck(t, a, c); d.Allowed || d.Source != sluice.FromStore {
			t.Fatalf("first check: %+v, want denied by the store", d)
		}
		calls := f.calls.Load()
		for i := range 5 {
			if d := mustCheck(t, a, c); d.Allowed || d.Source != sluice.FromLocalView || d.Hits[0].RetryAfter <= 0 {
				t.Fatalf("check %d: %+v, want denied locally with a RetryAfter", i+2, d)
			}
		}
		if got := f.calls.Load() - calls; got != 0 {
			t.Errorf("%d store calls while the denial stands, want 0", got)
		}
		time.Sleep(time.Minute)
		if d := mustCheck(t, a, c); !d.Allowed || d.Source != sluice.FromStore {
			t.Errorf("after the window: %+v, want allowed by the store", d)
		}
	})
}

// TestAsyncSeenForgetsOtherLimits: the seen answer is used only for the
// limit it was given for (as a slot's view): a check of the same state
// with another rate goes to the store.
func TestAsyncSeenForgetsOtherLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{})
		mustCheck(t, a, check(1, hit("k", "10r/h", sluice.Log)))
		if d := mustCheck(t, a, check(1, hit("k", "20r/h", sluice.Log))); d.Source != sluice.FromStore {
			t.Errorf("another rate: %+v, want decided by the store", d)
		}
		if d := mustCheck(t, a, check(1, hit("k", "20r/h", sluice.Log))); d.Source != sluice.FromLocalView || d.Hits[0].Remaining != 17 {
			t.Errorf("the new rate again: %+v, want local, 17 remaining", d)
		}
	})
}

// TestAsyncSeenAnswerExpires: an answer older than MaxViewAge is not used:
// the key's next check goes to the store, as with a slot's stale view.
func TestAsyncSeenAnswerExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{MaxViewAge: time.Second})
		c := check(1, hit("k", "10r/h", sluice.Log))
		mustCheck(t, a, c)
		time.Sleep(2 * time.Second)
		if d := mustCheck(t, a, c); d.Source != sluice.FromStore {
			t.Errorf("after MaxViewAge: %+v, want decided by the store", d)
		}
		if d := mustCheck(t, a, c); d.Source != sluice.FromLocalView {
			t.Errorf("then: %+v, want local", d)
		}
		if s := a.Stats(); s.Keys != 1 {
			t.Errorf("%d slots, want 1", s.Keys)
		}
	})
}

// TestAsyncResetForgetsSeen: Reset forgets the store's answer about a key
// seen once: the next check asks the store, which was reset.
func TestAsyncResetForgetsSeen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{})
		c := check(1, hit("k", "1r/h", sluice.Log))
		mustCheck(t, a, c)
		if err := a.Reset(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if d := mustCheck(t, a, c); !d.Allowed || d.Source != sluice.FromStore {
			t.Errorf("after Reset: %+v, want allowed by the store", d)
		}
	})
}

// TestAsyncSeenAnswerReachesSlots: a check of two keys, one with a slot
// and one seen for the first time, goes to the store, and the answer
// becomes the view of the key with a slot (not of a seen entry).
func TestAsyncSeenAnswerReachesSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: time.Hour})
		x, y := hit("x", "10r/h", sluice.Log), hit("y", "10r/h", sluice.Log)
		mustCheck(t, a, check(1, x))
		if d := mustCheck(t, a, check(1, x)); d.Source != sluice.FromLocalView {
			t.Fatalf("x's second check: %+v, want local", d)
		}
		// The store has 1 of x (1 more is owed), answers 8 remaining.
		if d := mustCheck(t, a, check(1, x, y)); !d.Allowed || d.Source != sluice.FromStore {
			t.Fatalf("x and y: %+v, want allowed by the store", d)
		}
		d := mustCheck(t, a, check(1, x))
		if d.Source != sluice.FromLocalView || d.Hits[0].Remaining != 6 {
			t.Errorf("x after the answer about x and y: %+v, want local, 6 remaining", d)
		}
		if d := mustCheck(t, a, check(1, x, y)); d.Source != sluice.FromLocalView || d.Hits[1].Remaining != 8 {
			t.Errorf("x and y again: %+v, want local, y 8 remaining", d)
		}
	})
}
