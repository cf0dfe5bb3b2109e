package faulttest

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
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

// hungRedis is a Guard in front of a Redis that the test stops with
// SIGSTOP after the warm-up.
type hungRedis struct {
	g      *edge.Guard
	close  func() // closes the store and its client
	resume func()
	before int // goroutines before the store was created
}

// newHungRedis starts Redis, a store and a Guard with the given breaker
// threshold, warms them up and stops Redis. With connWriteTimeout set, the
// store uses a rueidis client of its own with that ConnWriteTimeout (after
// which rueidis declares a silent connection dead and reconnects).
func newHungRedis(t *testing.T, failures int, connWriteTimeout time.Duration) *hungRedis {
	t.Helper()
	srv := redistest.Standalone(t)
	p := pid(t, srv)
	h := &hungRedis{before: runtime.NumGoroutine()}
	var store *redisstore.Store
	if connWriteTimeout == 0 {
		store = newStore(t, srv.URL())
		h.close = func() { store.Close() }
	} else {
		var client rueidis.Client
		store, client = newStoreWithClient(t, rueidis.ClientOption{
			InitAddress: []string{srv.Addr()}, DisableCache: true, ConnWriteTimeout: connWriteTimeout,
		})
		h.close = client.Close
	}
	b, err := edge.NewBreaker(edge.BreakerOptions{Failures: failures, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	h.g = newGuard(t, store, edge.GuardOptions{Breaker: b})
	warmUp(t, store, h.g, busyKey)
	h.resume = hang(t, p)
	return h
}

// recover resumes Redis, waits for the store to answer again, closes it,
// and checks that nothing is left running.
func (h *hungRedis) recover(t *testing.T) {
	t.Helper()
	s := h.g.Stats()
	t.Logf("guard %+v, breaker %+v", s, h.g.Breaker().Stats())
	if s.Timeouts == 0 {
		t.Errorf("no timeout counted against a hung Redis")
	}
	h.resume()
	waitStore(t, h.g, busyKey, 10*time.Second)
	h.close()
	waitGoroutines(t, h.before)
	if s := h.g.Stats(); s.Abandoned != 0 {
		t.Errorf("%d store calls still running after Close", s.Abandoned)
	}
}

// TestRedisHung stops Redis (SIGSTOP): connections stay open and nothing
// answers. With the breaker, most checks are answered without I/O; the
// first failures and one probe per back-off wait for the timeout.
func TestRedisHung(t *testing.T) {
	h := newHungRedis(t, 0, 0)
	assertP99(t, timeChecks(t, h.g, busyKey, outageChecks, 1, time.Millisecond, edge.PolicyOpen))
	h.recover(t)
}

// TestRedisHungEveryCheckWaits stops Redis with a breaker that never opens,
// so every check waits for the timeout, for three times the ConnWriteTimeout
// after which rueidis declares a silent connection dead (shortened from its
// default 10 s to keep the test short): the checks run through rueidis's
// reconnections to the stopped server, during which we saw it block past
// its context for about a second (the Guard then abandons the call; the
// mechanism itself is tested deterministically in package edge).
//
// On a loaded machine a goroutine waiting on a 50 ms timer is sometimes run
// hundreds of ms late, which says nothing about the Guard. So a control
// goroutine waits on plain 50 ms timers meanwhile, and the checks are held
// to the control's tail: a check that waited for the store, not for the
// machine, stands out. The control sees the machine as the checks do only
// if both run on one P: with several, the kernel may deschedule the thread
// that runs the checks for a second while the control's thread runs on, and
// the checks' tail then says nothing about the Guard either.
func TestRedisHungEveryCheckWaits(t *testing.T) {
	const hung = 6 * time.Second
	h := newHungRedis(t, 1<<30, 2*time.Second)
	procs := runtime.GOMAXPROCS(1)
	stop := make(chan struct{})
	control := make(chan []time.Duration)
	go func() { control <- timerLatencies(stop) }()
	var lat []time.Duration
	for start := time.Now(); time.Since(start) < hung; {
		lat = append(lat, timeChecks(t, h.g, busyKey, 1, 1, 0, edge.PolicyOpen)...)
	}
	close(stop)
	timers := <-control
	runtime.GOMAXPROCS(procs)
	t.Logf("%d checks over %v of hung Redis: %s", len(lat), hung, describe(lat))
	t.Logf("%d plain %v timers meanwhile: %s", len(timers), timeout, describe(timers))
	if p50 := percentile(lat, 50); p50 > timeout+slack {
		t.Errorf("median latency %v, want at most %v", p50, timeout+slack)
	}
	if worst, bound := percentile(lat, 100), percentile(timers, 100)+100*time.Millisecond; worst > bound {
		t.Errorf("slowest check %v, want at most %v (the slowest plain timer + 100ms): the Guard waited for the store past its deadline", worst, bound)
	}
	h.recover(t)
}

// timerLatencies waits on timers of the Guard's timeout until stop is
// closed and returns how long each wait took.
func timerLatencies(stop <-chan struct{}) []time.Duration {
	var lat []time.Duration
	for {
		start := time.Now()
		select {
		case <-stop:
			return lat
		case <-time.After(timeout):
			lat = append(lat, time.Since(start))
		}
	}
}

func TestRedisRestarted(t *testing.T) {
	srv := redistest.Standalone(t)
	// Recovery and exact limiting after it are the subject, not the
	// timeouts: on a loaded machine (2 cores, load ~18, -race) a store call
	// took over newStore's 1 s and a Guard's call over the default 50 ms,
	// which made checks after the restart fail-open ones (and probes fail,
	// each doubling the breaker's back-off). Generous timeouts keep every
	// answer the store's; the dead Redis still fails each call at once
	// (connection refused), so the outage is still seen.
	store, err := redisstore.Dial(srv.URL(), redisstore.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	g := newGuard(t, store, edge.GuardOptions{Timeout: 5 * time.Second})
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
	// The breaker probes after its back-off, which doubles after each
	// failed probe up to edge.DefaultMaxBackoff (5 s): a few probes that
	// fail while the restarted Redis starts must not fail the test.
	waitStore(t, dc, busyKey, 30*time.Second)
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
