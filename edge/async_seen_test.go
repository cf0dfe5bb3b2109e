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
// decided by the store and leaves no slot (only its bit in the filter of
// keys seen); its second answer makes the slot, and its next checks are
// decided locally, without a store call.
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
		c := check(1, hit("once-99", "10r/h", sluice.Log)) // the last: no key since could push its tag out
		if d := mustCheck(t, a, c); !d.Allowed || d.Source != sluice.FromStore {
			t.Fatalf("second check of a key seen once: %+v, want allowed by the store", d)
		}
		calls := f.calls.Load()
		for i := 3; i <= 4; i++ {
			d := mustCheck(t, a, c)
			if !d.Allowed || d.Source != sluice.FromLocalView {
				t.Fatalf("check %d of a key seen once: %+v, want allowed from the local view", i, d)
			}
			if got, want := d.Hits[0].Remaining, int64(10-i); got != want {
				t.Errorf("check %d: Remaining %d, want %d", i, got, want)
			}
		}
		if got := f.calls.Load() - calls; got != 0 {
			t.Errorf("%d store calls for the third and fourth checks, want 0", got)
		}
		if s := a.Stats(); s.Keys != 1 || s.Local != 2 || s.Sync != 101 {
			t.Errorf("stats %+v, want 1 slot, 2 local decisions, 101 sync", s)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := used(t, f.next, c); got != 4 {
			t.Errorf("store's usage after one interval: %v, want 4", got)
		}
	})
}

// TestAsyncSeenDenialHolds: a key whose slot was made from a denial by
// the store is denied locally on its next checks while that denial
// stands, then asked again.
func TestAsyncSeenDenialHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: time.Second})
		c := check(1, hit("k", "2r/m", sluice.Log))
		mustCheck(t, f.next, c)
		mustCheck(t, f.next, c) // full in the store, not through a
		for i := range 2 {
			if d := mustCheck(t, a, c); d.Allowed || d.Source != sluice.FromStore {
				t.Fatalf("check %d: %+v, want denied by the store", i+1, d)
			}
		}
		calls := f.calls.Load()
		for i := range 5 {
			if d := mustCheck(t, a, c); d.Allowed || d.Source != sluice.FromLocalView || d.Hits[0].RetryAfter <= 0 {
				t.Fatalf("check %d: %+v, want denied locally with a RetryAfter", i+3, d)
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

// TestAsyncSeenForgetsOtherLimits: a view is used only for the limit it
// was given for: a check of the same state with another rate goes to the
// store, whose answer is the view from then on.
func TestAsyncSeenForgetsOtherLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{})
		mustCheck(t, a, check(1, hit("k", "10r/h", sluice.Log)))
		mustCheck(t, a, check(1, hit("k", "10r/h", sluice.Log)))
		if d := mustCheck(t, a, check(1, hit("k", "20r/h", sluice.Log))); d.Source != sluice.FromStore {
			t.Errorf("another rate: %+v, want decided by the store", d)
		}
		if d := mustCheck(t, a, check(1, hit("k", "20r/h", sluice.Log))); d.Source != sluice.FromLocalView || d.Hits[0].Remaining != 16 {
			t.Errorf("the new rate again: %+v, want local, 16 remaining", d)
		}
	})
}

// TestAsyncSeenAnswerExpires: a view older than MaxViewAge is not used:
// the key's next check goes to the store, whose answer is the new view.
func TestAsyncSeenAnswerExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{MaxViewAge: time.Second})
		c := check(1, hit("k", "10r/h", sluice.Log))
		mustCheck(t, a, c)
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

// TestAsyncResetForgetsSeen: Reset forgets a key's view: its next check
// asks the store, which was reset.
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
// becomes the view of the key with a slot; the other gets its slot at
// its second answer.
func TestAsyncSeenAnswerReachesSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: 30 * time.Minute})
		x, y := hit("x", "10r/h", sluice.Log), hit("y", "10r/h", sluice.Log)
		mustCheck(t, a, check(1, x))
		mustCheck(t, a, check(1, x))
		if d := mustCheck(t, a, check(1, x)); d.Source != sluice.FromLocalView {
			t.Fatalf("x's third check: %+v, want local", d)
		}
		// The store has 2 of x (1 more is owed), answers 7 remaining.
		if d := mustCheck(t, a, check(1, x, y)); !d.Allowed || d.Source != sluice.FromStore {
			t.Fatalf("x and y: %+v, want allowed by the store", d)
		}
		d := mustCheck(t, a, check(1, x))
		if d.Source != sluice.FromLocalView || d.Hits[0].Remaining != 5 {
			t.Errorf("x after the answer about x and y: %+v, want local, 5 remaining", d)
		}
		if d := mustCheck(t, a, check(1, x, y)); !d.Allowed || d.Source != sluice.FromStore {
			t.Errorf("x and y again: %+v, want allowed by the store (y's second answer)", d)
		}
		if d := mustCheck(t, a, check(1, x, y)); d.Source != sluice.FromLocalView || d.Hits[1].Remaining != 7 {
			t.Errorf("x and y a third time: %+v, want local, y 7 remaining", d)
		}
	})
}
