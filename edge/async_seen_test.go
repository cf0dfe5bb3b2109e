package edge_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

// TestAsyncKeySeenTwiceHasNoSlot: a key checked once or twice is decided
// by the store and leaves no slot (only its mark); its third answer makes
// the slot, and its next checks are decided locally, without a store call.
func TestAsyncKeySeenTwiceHasNoSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: 100 * time.Millisecond})
		for k := range 100 {
			c := check(1, hit(fmt.Sprint("twice-", k), "10r/h", sluice.Log))
			for i := range 2 {
				if d := mustCheck(t, a, c); !d.Allowed || d.Source != sluice.FromStore {
					t.Fatalf("key %d, check %d: %+v, want allowed by the store", k, i+1, d)
				}
			}
		}
		if s := a.Stats(); s.Keys != 0 || s.Sync != 200 || s.Overflow != 0 {
			t.Fatalf("after 100 keys checked twice: %+v, want no slot, 200 sync checks", s)
		}
		c := check(1, hit("twice-99", "10r/h", sluice.Log)) // the last: no key since could overwrite its mark
		if d := mustCheck(t, a, c); !d.Allowed || d.Source != sluice.FromStore {
			t.Fatalf("third check of a key: %+v, want allowed by the store", d)
		}
		if s := a.Stats(); s.Keys != 1 {
			t.Fatalf("after a key's third check: %+v, want its slot", s)
		}
		calls := f.calls.Load()
		for i := 4; i <= 5; i++ {
			d := mustCheck(t, a, c)
			if !d.Allowed || d.Source != sluice.FromLocalView {
				t.Fatalf("check %d of a key: %+v, want allowed from the local view", i, d)
			}
			if got, want := d.Hits[0].Remaining, int64(10-i); got != want {
				t.Errorf("check %d: Remaining %d, want %d", i, got, want)
			}
		}
		if got := f.calls.Load() - calls; got != 0 {
			t.Errorf("%d store calls for the fourth and fifth checks, want 0", got)
		}
		if s := a.Stats(); s.Keys != 1 || s.Local != 2 || s.Sync != 201 {
			t.Errorf("stats %+v, want 1 slot, 2 local decisions, 201 sync", s)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := used(t, f.next, c); got != 5 {
			t.Errorf("store's usage after one interval: %v, want 5", got)
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
		for i := range 3 {
			if d := mustCheck(t, a, c); d.Allowed || d.Source != sluice.FromStore {
				t.Fatalf("check %d: %+v, want denied by the store", i+1, d)
			}
		}
		calls := f.calls.Load()
		for i := range 5 {
			if d := mustCheck(t, a, c); d.Allowed || d.Source != sluice.FromLocalView || d.Hits[0].RetryAfter <= 0 {
				t.Fatalf("check %d: %+v, want denied locally with a RetryAfter", i+4, d)
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
		for range 3 {
			mustCheck(t, a, check(1, hit("k", "10r/h", sluice.Log)))
		}
		if d := mustCheck(t, a, check(1, hit("k", "20r/h", sluice.Log))); d.Source != sluice.FromStore {
			t.Errorf("another rate: %+v, want decided by the store", d)
		}
		if d := mustCheck(t, a, check(1, hit("k", "20r/h", sluice.Log))); d.Source != sluice.FromLocalView || d.Hits[0].Remaining != 15 {
			t.Errorf("the new rate again: %+v, want local, 15 remaining", d)
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
		for range 3 {
			mustCheck(t, a, c)
		}
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
// its third answer.
func TestAsyncSeenAnswerReachesSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: 30 * time.Minute})
		x, y := hit("x", "10r/h", sluice.Log), hit("y", "10r/h", sluice.Log)
		for range 3 {
			mustCheck(t, a, check(1, x))
		}
		if d := mustCheck(t, a, check(1, x)); d.Source != sluice.FromLocalView {
			t.Fatalf("x's fourth check: %+v, want local", d)
		}
		// The store has 3 of x (1 more is owed), answers 6 remaining.
		if d := mustCheck(t, a, check(1, x, y)); !d.Allowed || d.Source != sluice.FromStore {
			t.Fatalf("x and y: %+v, want allowed by the store", d)
		}
		d := mustCheck(t, a, check(1, x))
		if d.Source != sluice.FromLocalView || d.Hits[0].Remaining != 4 {
			t.Errorf("x after the answer about x and y: %+v, want local, 4 remaining", d)
		}
		for i := 2; i <= 3; i++ {
			if d := mustCheck(t, a, check(1, x, y)); !d.Allowed || d.Source != sluice.FromStore {
				t.Errorf("x and y, check %d: %+v, want allowed by the store (y's answer %d)", i, d, i)
			}
		}
		if d := mustCheck(t, a, check(1, x, y)); d.Source != sluice.FromLocalView || d.Hits[1].Remaining != 6 {
			t.Errorf("x and y a fourth time: %+v, want local, y 6 remaining", d)
		}
	})
}
