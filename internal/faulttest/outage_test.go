package faulttest

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
)

// outageChecks is the number of checks timed during an outage.
const outageChecks = 1000

// busyKey is a check no policy denies on its own: the fallback of
// PolicyLocal allows it throughout the test.
var busyKey = sluice.Check{Hits: []sluice.Hit{hit("busy", "100000r/s", sluice.GCRA)}, Cost: 1}

// warmUp checks c directly on the store until the connection and the
// scripts are in place, then through the guard until the store answers it.
func warmUp(t *testing.T, store sluice.Limiter, g *edge.Guard, c sluice.Check) {
	t.Helper()
	for range 100 {
		mustCheck(t, store, c)
	}
	waitStore(t, g, c, 10*time.Second)
}

// timeChecks runs n checks of c on workers goroutines, each pausing for
// pause between its checks, and returns the latency of each Check call.
// Every decision must come from policy p.
func timeChecks(t *testing.T, g *edge.Guard, c sluice.Check, n, workers int, pause time.Duration, p edge.Policy) []time.Duration {
	t.Helper()
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var d sluice.Decision
			for i := w; i < n; i += workers {
				start := time.Now()
				err := g.Check(t.Context(), c, &d)
				lat[i] = time.Since(start)
				if err != nil {
					t.Errorf("check %d during the outage: %v", i, err)
					return
				}
				if want := degradedSource(p); d.Source != want {
					t.Errorf("check %d during the outage: source %v, want %v", i, d.Source, want)
					return
				}
				time.Sleep(pause)
			}
		})
	}
	wg.Wait()
	return lat
}

func assertP99(t *testing.T, lat []time.Duration) {
	t.Helper()
	t.Logf("%d checks during the outage: %s", len(lat), describe(lat))
	if p99 := percentile(lat, 99); p99 > timeout+slack {
		t.Errorf("p99 latency %v during the outage, want at most %v (timeout %v + %v)", p99, timeout+slack, timeout, slack)
	}
}

func TestRedisKilled(t *testing.T) {
	for _, p := range []edge.Policy{edge.PolicyOpen, edge.PolicyClosed, edge.PolicyLocal} {
		t.Run(p.String(), func(t *testing.T) {
			srv := redistest.Standalone(t)
			before := runtime.NumGoroutine()
			store := newStore(t, srv.URL())
			g := newGuard(t, store, edge.GuardOptions{Policy: p})
			warmUp(t, store, g, busyKey)

			srv.Kill()
			during := runtime.NumGoroutine()
			// A check every millisecond or so: the breaker probes during the
			// outage.
			assertP99(t, timeChecks(t, g, busyKey, outageChecks, 1, time.Millisecond, p))
			if n := runtime.NumGoroutine(); n > during+10 {
				t.Errorf("%d goroutines after %d checks against a dead Redis, %d before: checks leave goroutines behind",
					n, outageChecks, during)
			}
			s, b := g.Stats(), g.Breaker().Stats()
			t.Logf("guard %+v, breaker %+v", s, b)
			if s.Degraded() != outageChecks || b.Opens != 1 || s.Skipped == 0 {
				t.Errorf("want %d degraded decisions, the breaker opened once, checks skipped", outageChecks)
			}
			store.Close()
			waitGoroutines(t, before)
		})
	}
}

func TestRedisHung(t *testing.T) {
	tests := []struct {
		name     string
		failures int // breaker threshold
		workers  int
		pause    time.Duration
		// p99 is the bound on the 99th percentile latency.
		p99 time.Duration
	}{
		// With the breaker (the default), most checks are answered without
		// I/O; one probe per back-off waits for the timeout.
		{"breaker", 0, 1, time.Millisecond, timeout + slack},
		// With a breaker that never opens, every check waits for the
		// timeout, 25 at a time so the test takes two seconds. Then p99 is
		// the precision of 25 simultaneous timers, which a loaded 2-core
		// machine under the race detector does not give to 5 ms (we saw
		// 70 ms without it, 115 ms with it); the bound is looser, but still
		// fails if a check waits for a store that does not honour its
		// context.
		{"every-check-waits", 1 << 30, 25, 0, 3 * timeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Standalone(t)
			p := pid(t, srv)
			before := runtime.NumGoroutine()
			store := newStore(t, srv.URL())
			b, err := edge.NewBreaker(edge.BreakerOptions{Failures: tt.failures, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			g := newGuard(t, store, edge.GuardOptions{Breaker: b})
			warmUp(t, store, g, busyKey)

			resume := hang(t, p)
			lat := timeChecks(t, g, busyKey, outageChecks, tt.workers, tt.pause, edge.PolicyOpen)
			t.Logf("%d checks during the outage: %s", len(lat), describe(lat))
			if p50 := percentile(lat, 50); p50 > timeout+slack {
				t.Errorf("median latency %v, want at most %v", p50, timeout+slack)
			}
			if p99 := percentile(lat, 99); p99 > tt.p99 {
				t.Errorf("p99 latency %v, want at most %v", p99, tt.p99)
			}
			s := g.Stats()
			t.Logf("guard %+v, breaker %+v", s, b.Stats())
			if s.Timeouts == 0 {
				t.Errorf("no timeout counted against a hung Redis")
			}
			resume()
			waitStore(t, g, busyKey, 10*time.Second)
			store.Close()
			waitGoroutines(t, before)
			if s := g.Stats(); s.Abandoned != 0 {
				t.Errorf("%d store calls still running after Close", s.Abandoned)
			}
		})
	}
}

func TestRedisRestarted(t *testing.T) {
	srv := redistest.Standalone(t)
	store := newStore(t, srv.URL())
	g := newGuard(t, store, edge.GuardOptions{})
	dc, err := edge.NewDenyCache(g, edge.DenyCacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warmUp(t, store, g, busyKey)

	srv.Kill()
	for range 20 {
		if d := mustCheck(t, dc, busyKey); d.Source != sluice.FromFailOpen {
			t.Fatalf("source %v with Redis dead, want fail-open", d.Source)
		}
	}
	if st := g.Breaker().State(); st != edge.BreakerOpen {
		t.Fatalf("breaker %v after 20 failures, want open", st)
	}

	srv.Restart() // same port, empty, no script loaded
	waitStore(t, dc, busyKey, 10*time.Second)
	// Exact limiting, by the same Store, Guard and DenyCache.
	c := sluice.Check{Hits: []sluice.Hit{hit("after-restart", "10r/m", sluice.Log)}, Cost: 1}
	for i := range 10 {
		if d := mustCheck(t, dc, c); !d.Allowed || d.Source != sluice.FromStore {
			t.Fatalf("check %d after the restart: allowed %v from %v, want allowed by the store", i+1, d.Allowed, d.Source)
		}
	}
	if d := mustCheck(t, dc, c); d.Allowed || d.Source != sluice.FromStore || d.Hits[0].Used != 10 {
		t.Errorf("11th check: %+v, want denied by the store with 10 used", d)
	}
	if d := mustCheck(t, dc, c); d.Allowed || d.Source != sluice.FromDenyCache {
		t.Errorf("12th check: allowed %v from %v, want denied from the deny cache", d.Allowed, d.Source)
	}
	if st := g.Breaker().State(); st != edge.BreakerClosed {
		t.Errorf("breaker %v after recovery, want closed", st)
	}
}
