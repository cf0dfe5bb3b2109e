package edge_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

func TestBreakerOpensAfterConsecutiveFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		g := newGuard(t, f, edge.GuardOptions{})
		c := check(1, tenPerMinute)
		f.set(refuse)
		for i := range edge.DefaultFailures - 1 {
			mustCheck(t, g, c)
			if st := g.Breaker().State(); st != edge.BreakerClosed {
				t.Fatalf("after %d failures the breaker is %v, want closed", i+1, st)
			}
		}
		// A success in between starts the count again.
		f.set(answer)
		mustCheck(t, g, c)
		f.set(refuse)
		for range edge.DefaultFailures - 1 {
			mustCheck(t, g, c)
		}
		if st := g.Breaker().State(); st != edge.BreakerClosed {
			t.Fatalf("breaker %v after a success and %d failures, want closed", st, edge.DefaultFailures-1)
		}
		mustCheck(t, g, c)
		if s := g.Breaker().Stats(); s.State != edge.BreakerOpen || s.Opens != 1 {
			t.Fatalf("breaker %+v after %d consecutive failures, want open once", s, edge.DefaultFailures)
		}
		calls := f.calls.Load()
		for range 100 {
			if d := mustCheck(t, g, c); d.Source != sluice.FromFailOpen {
				t.Fatalf("source %v with the breaker open, want fail-open", d.Source)
			}
		}
		if got := f.calls.Load() - calls; got != 0 {
			t.Errorf("%d store calls with the breaker open, want 0", got)
		}
		if got := g.Stats().Skipped; got != 100 {
			t.Errorf("Skipped = %d, want 100", got)
		}
	})
}

// TestBreakerCountsCallsInFlightTogetherOnce: checks whose store calls were
// in flight together and failed together (a batch that timed out) count
// as one failure: a single stall does not open the breaker, however many
// callers it held; calls that fail one after another still do.
func TestBreakerCountsCallsInFlightTogetherOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		g := newGuard(t, f, edge.GuardOptions{})
		c := check(1, tenPerMinute)
		f.set(hang) // every call times out after the guard's timeout
		var wg sync.WaitGroup
		for range 4 * edge.DefaultFailures {
			wg.Go(func() {
				if d := mustCheck(t, g, c); d.Source != sluice.FromFailOpen {
					t.Errorf("source %v of a check that timed out, want fail-open", d.Source)
				}
			})
		}
		wg.Wait()
		if s := g.Breaker().Stats(); s.State != edge.BreakerClosed || s.Failures != 1 || s.Errors != 4*edge.DefaultFailures {
			t.Fatalf("breaker %+v after %d calls that timed out together, want closed, 1 failure, %d errors",
				s, 4*edge.DefaultFailures, 4*edge.DefaultFailures)
		}
		for i := 2; i < edge.DefaultFailures; i++ {
			mustCheck(t, g, c)
			if s := g.Breaker().Stats(); s.State != edge.BreakerClosed || s.Failures != int64(i) {
				t.Fatalf("breaker %+v after %d failed calls one after another, want closed", s, i)
			}
		}
		mustCheck(t, g, c)
		if s := g.Breaker().Stats(); s.State != edge.BreakerOpen || s.Opens != 1 {
			t.Fatalf("breaker %+v after %d failed calls one after another, want open", s, edge.DefaultFailures)
		}
	})
}

// probeTimes runs checks every millisecond for d and returns the times,
// since the start, at which the store was called.
func probeTimes(t *testing.T, g *edge.Guard, f *flaky, d time.Duration) []time.Duration {
	t.Helper()
	var times []time.Duration
	start := time.Now()
	for time.Since(start) < d {
		calls := f.calls.Load()
		mustCheck(t, g, check(1, tenPerMinute))
		if f.calls.Load() != calls {
			times = append(times, time.Since(start))
		}
		time.Sleep(time.Millisecond)
	}
	return times
}

func TestBreakerBackoffGrowsToCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		g := newGuard(t, f, edge.GuardOptions{})
		f.set(refuse)
		for range edge.DefaultFailures {
			mustCheck(t, g, check(1, tenPerMinute))
		}
		probes := probeTimes(t, g, f, 25*time.Second)
		// Back-offs 500ms, 1s, 2s, 4s, then 5s (the cap), each shortened by
		// up to a quarter; the loop adds up to 1ms per wait.
		want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
		last := time.Duration(0)
		for i, w := range want {
			if i >= len(probes) {
				t.Fatalf("only %d probes in 25s: %v", len(probes), probes)
			}
			gap := probes[i] - last
			if gap < w*3/4 || gap > w+time.Millisecond {
				t.Errorf("probe %d came %v after the previous, want within [%v, %v]", i+1, gap, w*3/4, w)
			}
			last = probes[i]
		}
		s := g.Breaker().Stats()
		if s.Opens != 1 || s.Probes != uint64(len(probes)) || s.FailedProbes != s.Probes {
			t.Errorf("breaker stats %+v, want 1 open and %d failed probes", s, len(probes))
		}
	})
}

func TestBreakerOneProbeAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		g := newGuard(t, f, edge.GuardOptions{Timeout: 20 * time.Millisecond})
		f.set(refuse)
		for range edge.DefaultFailures {
			mustCheck(t, g, check(1, tenPerMinute))
		}
		time.Sleep(edge.DefaultBackoff)
		f.set(hang)
		calls := f.calls.Load()
		var wg sync.WaitGroup
		wg.Go(func() { mustCheck(t, g, check(1, tenPerMinute)) }) // the probe
		synctest.Wait()                                           // it hangs in the store
		if st := g.Breaker().State(); st != edge.BreakerProbing {
			t.Fatalf("breaker %v while the probe hangs, want probing", st)
		}
		for _, s := range checkAll(t, g, 50) {
			if s != sluice.FromFailOpen {
				t.Errorf("source %v during the probe, want fail-open", s)
			}
		}
		wg.Wait()
		if got := f.calls.Load() - calls; got != 1 {
			t.Errorf("%d store calls while probing, want 1", got)
		}
		if st := g.Breaker().State(); st != edge.BreakerOpen {
			t.Errorf("breaker %v after the probe timed out, want open", st)
		}
	})
}

func TestBreakerClosesWhenStoreReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		g := newGuard(t, f, edge.GuardOptions{})
		c := check(1, tenPerMinute)
		f.set(refuse)
		for range edge.DefaultFailures {
			mustCheck(t, g, c)
		}
		f.set(answer)
		time.Sleep(edge.DefaultBackoff)
		for i := range 10 {
			if d := mustCheck(t, g, c); d.Source != sluice.FromStore || !d.Allowed {
				t.Fatalf("check %d after recovery: allowed %v from %v, want allowed by the store", i+1, d.Allowed, d.Source)
			}
		}
		// Exact limiting resumed: the store's own count, not a policy.
		if d := mustCheck(t, g, c); d.Allowed || d.Source != sluice.FromStore {
			t.Errorf("11th check: allowed %v from %v, want denied by the store", d.Allowed, d.Source)
		}
		if st := g.Breaker().State(); st != edge.BreakerClosed {
			t.Errorf("breaker %v, want closed", st)
		}
	})
}

func TestBreakerProbeReleasedByBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		g := newGuard(t, f, edge.GuardOptions{})
		f.set(refuse)
		for range edge.DefaultFailures {
			mustCheck(t, g, check(1, tenPerMinute))
		}
		time.Sleep(edge.DefaultBackoff)
		f.set(reject) // the probe meets a store that rejects its input
		var d sluice.Decision
		if err := g.Check(t.Context(), check(1, tenPerMinute), &d); !errors.Is(err, sluice.ErrInvalid) {
			t.Fatalf("probe: %v, want ErrInvalid", err)
		}
		f.set(answer) // the next check probes at once, without a new back-off
		if d := mustCheck(t, g, check(1, tenPerMinute)); d.Source != sluice.FromStore {
			t.Errorf("source %v after a released probe, want store", d.Source)
		}
	})
}

func TestNewBreakerValidates(t *testing.T) {
	for _, opts := range []edge.BreakerOptions{
		{Failures: -1},
		{Backoff: -time.Second},
		{MaxBackoff: -time.Second},
		{Backoff: 2 * time.Second, MaxBackoff: time.Second},
	} {
		if _, err := edge.NewBreaker(opts); !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("NewBreaker(%+v) = %v, want ErrInvalid", opts, err)
		}
	}
	b, err := edge.NewBreaker(edge.BreakerOptions{Backoff: 10 * time.Second})
	if err != nil {
		t.Errorf("NewBreaker with a Backoff above the default cap: %v", err)
	}
	_ = b
}
