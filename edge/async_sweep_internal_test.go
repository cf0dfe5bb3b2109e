package edge

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// TestSweepLosesNoCost: a check that reaches a slot just as the sweep
// forgets it (idle, owing nothing) is not lost: judged and removed under
// one hold of the slot's lock, the slot is dead by the time the check
// locks it, and the check asks the store. A sweep that judged under the
// lock and removed after releasing it would let a check between the two be
// admitted from the view and its cost be forgotten with the slot.
func TestSweepLosesNoCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, c := newMemAsync(t)
		var d sluice.Decision
		// Three checks: the third makes the key's slot (viewSight).
		for i := range viewSight {
			if err := a.Check(context.Background(), c, &d); err != nil || !d.Allowed {
				t.Fatalf("check %d: %v %+v", i+1, err, d)
			}
		}
		if a.Stats().Keys != 1 {
			t.Fatalf("no slot after %d checks: %+v", viewSight, a.Stats())
		}
		if err := a.Flush(context.Background()); err != nil { // it owes nothing
			t.Fatal(err)
		}
		admitted := viewSight
		a.sweepHook = func(s *slot) {
			var d sluice.Decision
			if err := a.decideOrAsk(context.Background(), &c, []*slot{s}, &d); err != nil {
				t.Errorf("the check during the sweep: %v", err)
			} else if d.Allowed {
				admitted++
			}
		}
		a.sweep(a.mono() + int64(a.maxViewAge+time.Second))
		a.sweepHook = nil
		if err := a.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		peek := c
		peek.Cost = 0
		if err := a.next.Check(context.Background(), peek, &d); err != nil {
			t.Fatal(err)
		}
		if got := d.Hits[0].Used; got != float64(admitted) {
			t.Errorf("the store counts %v, want the %d checks admitted: a check during the sweep lost its cost", got, admitted)
		}
		if admitted != viewSight+1 {
			t.Errorf("%d checks admitted, want %d", admitted, viewSight+1)
		}
	})
}

// newMemAsync returns an Async with the default options in front of a
// memory store, closed when t ends, and a check of cost 1 on key "k"
// under 100r/h.
func newMemAsync(t *testing.T) (*Async, sluice.Check) {
	t.Helper()
	m, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAsync(m, AsyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	l, err := sluice.ParseLimit("100r/h")
	if err != nil {
		t.Fatal(err)
	}
	return a, sluice.Check{Cost: 1, Hits: []sluice.Hit{{Key: "k", Limit: l}}}
}
