package edge_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

// TestAsyncLocalDecisionsYieldDuringAsk: while a check is being asked of
// the store, a caller looping on local decisions gives up its processor
// now and then, as deny cache hits do (TestDenyCacheHitsYieldDuringStoreCall):
// on one processor, the goroutine started before the loop runs after a
// few decisions, not when the runtime preempts the loop (tens of
// thousands of decisions).
func TestAsyncLocalDecisionsYieldDuringAsk(t *testing.T) {
	h := &held{next: newMemstore(t, nil), key: "asked", started: make(chan struct{}), released: make(chan struct{})}
	a := newAsync(t, h, edge.AsyncOptions{})
	local := check(1, hit("local", "1000000r/h", sluice.SlidingWindow))
	mustCheck(t, a, local)
	mustCheck(t, a, local)
	mustCheck(t, a, local) // the store's third answer becomes the key's view
	asked := make(chan error, 1)
	go func() {
		var d sluice.Decision
		asked <- a.Check(context.Background(), check(1, hit("asked", "1r/h", sluice.Log)), &d)
	}()
	<-h.started // the first check of "asked" is under way in the store

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var ran atomicInt
	go func() { ran.Store(1) }()
	n := 0
	var d sluice.Decision
	for ran.Load() == 0 {
		if err := a.Check(context.Background(), local, &d); err != nil || !d.Allowed || d.Source != sluice.FromLocalView {
			t.Fatalf("check %d: %v, allowed %v, source %v; want allowed from the view", n, err, d.Allowed, d.Source)
		}
		n++
	}
	close(h.released)
	if err := <-asked; err != nil {
		t.Fatal(err)
	}
	// One decision in 8 yields: 1,000 without one has a chance of 1e-58.
	if n > 1000 {
		t.Errorf("the waiting goroutine ran after %d local decisions; want a few", n)
	}
	t.Logf("the waiting goroutine ran after %d local decisions", n)
}
