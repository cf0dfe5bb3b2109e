package faulttest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
)

func TestScriptFlushStandalone(t *testing.T) {
	srv := redistest.Standalone(t)
	g := newGuard(t, newStore(t, srv.URL()), edge.GuardOptions{Policy: edge.PolicyClosed, Timeout: time.Second})
	flushBetweenChecks(t, g, func() {
		if err := srv.Do("SCRIPT", "FLUSH").Error(); err != nil {
			t.Fatalf("SCRIPT FLUSH: %v", err)
		}
	})
}

func TestScriptFlushCluster(t *testing.T) {
	cl := redistest.NewCluster(t)
	g := newGuard(t, newStore(t, cl.URL()), edge.GuardOptions{Policy: edge.PolicyClosed, Timeout: time.Second})
	flushBetweenChecks(t, g, func() {
		for _, n := range cl.Nodes() {
			if err := n.Do("SCRIPT", "FLUSH").Error(); err != nil {
				t.Fatalf("SCRIPT FLUSH on %s: %v", n.Addr(), err)
			}
		}
	})
}

// flushBetweenChecks checks, flushes the scripts, and checks again: the
// second check must be decided by the store (the script re-sent after
// NOSCRIPT), not by the failure policy, and count on the first one.
func flushBetweenChecks(t *testing.T, g *edge.Guard, flush func()) {
	t.Helper()
	c := sluice.Check{Hits: []sluice.Hit{hit("flush", "10r/m", sluice.Log), hit("flush", "5r/s", sluice.GCRA)}, Cost: 1}
	for round := range 3 {
		d := mustCheck(t, g, c)
		if !d.Allowed || d.Source != sluice.FromStore || d.Hits[0].Used != float64(round+1) {
			t.Fatalf("check %d: %+v, want allowed by the store with %d used", round+1, d, round+1)
		}
		flush()
	}
	if s := g.Stats(); s.StoreErrors != 0 {
		t.Errorf("guard stats %+v: a SCRIPT FLUSH was seen as a store failure", s)
	}
}

func TestClusterMasterKilled(t *testing.T) {
	cl := redistest.NewCluster(t)
	store := newStore(t, cl.URL())
	g := newGuard(t, store, edge.GuardOptions{})
	// The group puts every check on the slot of tag "user42".
	c := func(key, spec string, algo sluice.Algorithm) sluice.Check {
		return sluice.Check{Hits: []sluice.Hit{hit(key, spec, algo)}, Cost: 1, Group: "user42"}
	}
	busy := c("busy", "100000r/s", sluice.GCRA)
	warmUp(t, store, g, busy)

	// Checks keep coming during the failover: none may fail.
	var errs, degraded atomic.Int64
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		var d sluice.Decision
		for ctx.Err() == nil {
			if err := g.Check(context.Background(), busy, &d); err != nil {
				errs.Add(1)
				t.Errorf("check during the failover: %v", err)
			} else if d.Source.Degraded() {
				degraded.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	old := cl.KillMaster("{user42}") // returns once the replica is promoted
	promoted := cl.MasterOf("{user42}")
	if promoted == old {
		t.Fatalf("the master of {user42} is still %s", old.Addr())
	}
	// The promoted node may hold the scripts (replicated) or not; make sure
	// it does not, so the store meets NOSCRIPT there.
	if err := promoted.Do("SCRIPT", "FLUSH").Error(); err != nil {
		t.Fatalf("SCRIPT FLUSH on %s: %v", promoted.Addr(), err)
	}
	waitStore(t, g, busy, 30*time.Second)
	stop()
	wg.Wait()
	t.Logf("failover: %d decisions degraded, %d errors; guard %+v, breaker %+v",
		degraded.Load(), errs.Load(), g.Stats(), g.Breaker().Stats())

	// Exact limiting on the promoted master.
	fresh := c("after-failover", "10r/m", sluice.Log)
	for i := range 10 {
		if d := mustCheck(t, g, fresh); !d.Allowed || d.Source != sluice.FromStore {
			t.Fatalf("check %d after the failover: allowed %v from %v, want allowed by the store", i+1, d.Allowed, d.Source)
		}
	}
	if d := mustCheck(t, g, fresh); d.Allowed || d.Source != sluice.FromStore {
		t.Errorf("11th check after the failover: allowed %v from %v, want denied by the store", d.Allowed, d.Source)
	}
}
