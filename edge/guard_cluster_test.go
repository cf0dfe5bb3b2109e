package edge_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// failoverLoad is what one caller saw during TestGuardClusterFailover.
type failoverLoad struct {
	healthy, healthyDegraded int // checks of keys on the masters that stay up
	victim, victimDegraded   int // checks of keys on the killed master
	lastVictimDegraded       time.Time
	errs                     []error
}

func (l *failoverLoad) add(o failoverLoad) {
	l.healthy += o.healthy
	l.healthyDegraded += o.healthyDegraded
	l.victim += o.victim
	l.victimDegraded += o.victimDegraded
	if o.lastVictimDegraded.After(l.lastVictimDegraded) {
		l.lastVictimDegraded = o.lastVictimDegraded
	}
	l.errs = append(l.errs, o.errs...)
}

// TestGuardClusterFailover fails one master of a real 3+3 Redis Cluster
// (cluster-require-full-coverage no), killed (SIGKILL: connections
// refused at once) or hung (SIGSTOP: connections open, nothing answers,
// as a lost host), while 16 callers check 1,000 keys through a Guard whose breaker
// keeps a state per master (the Redis store is its Partitioner). Keys on
// the two other masters must all be decided by the store, before, during
// and after the failover; the killed master's keys must be back on the
// store within the failover plus one breaker back-off, the failover lasting
// until the Cluster is healthy again and the client routes to the promoted
// replica (rueidis reads the slot map again within a random delay of up to
// a second after a failed call); and a hot key on the killed master, 200 of 300 used
// before the kill, must have been admitted by the store exactly 300 times
// in all, with the store holding exactly 300.
//
// The store and the Guard get a timeout of one second: on a loaded test
// machine a healthy call may wait past the default 50ms for a CPU, which is
// not a node's failure. A killed node refuses connections at once; each
// call to a hung one waits the whole second, which would fail the healthy
// masters' checks queued behind it.
func TestGuardClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six-node Clusters and fails one master over")
	}
	t.Run("killed", func(t *testing.T) {
		testFailover(t, 0, func(_ *redistest.Cluster, m *redistest.Server) { m.Kill() })
	})
	// A call sent to the hung master just before the client reroutes
	// fails only at its timeout.
	t.Run("hung", func(t *testing.T) {
		testFailover(t, failoverTimeout, func(c *redistest.Cluster, m *redistest.Server) { c.Hang(m) })
	})
}

// failoverTimeout is the store's and the Guard's timeout in
// TestGuardClusterFailover.
const failoverTimeout = time.Second

// testFailover is TestGuardClusterFailover with the master failed by fail;
// lastCall is how long after the client's reroute a call to the failed
// master may still fail.
func testFailover(t *testing.T, lastCall time.Duration, fail func(*redistest.Cluster, *redistest.Server)) {
	const (
		callers = 16
		nKeys   = 1000
		timeout = failoverTimeout
		backoff = edge.DefaultBackoff
		// The client's reroute: rueidis reads the slot map every second
		// and within a random delay of up to 1s after a failed call, the
		// store's own map within 100ms, plus scheduling on a loaded machine.
		reroute  = 1250 * time.Millisecond
		hotRate  = 300
		hotFirst = 200
		after    = 4 * time.Second // load kept after the Cluster is healthy: longer than the bound below
		hotWait  = time.Minute     // for the hot key's denial: a hang, not a slow machine
	)
	c := redistest.NewClusterArgs(t, "--cluster-require-full-coverage", "no")
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	store, err := redisstore.Dial(c.URL(), redisstore.Options{Timeout: timeout, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	b, err := edge.NewBreaker(edge.BreakerOptions{Parts: store, Backoff: backoff, MaxBackoff: backoff, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	g, err := edge.NewGuard(store, edge.GuardOptions{Breaker: b, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}

	hot := check(1, hit("hot", fmt.Sprintf("%dr/h", hotRate), sluice.Log))
	owners := c.SlotMasters()
	victim := owners[redistest.Slot("hot")]
	checks := make([]sluice.Check, nKeys)
	onVictim := make([]bool, nKeys)
	for i := range checks {
		key := fmt.Sprint("key-", i)
		checks[i] = check(1, hit(key, "1000000r/h", sluice.SlidingWindow))
		onVictim[i] = owners[redistest.Slot(key)] == victim
	}

	// Every key decided by the store once, and every master named by the
	// store's slot map, before the load.
	waitParts(t, store, 3)
	for i, ck := range checks {
		if d := mustCheck(t, g, ck); d.Source != sluice.FromStore {
			t.Fatalf("key %d before the failover: source %v, want the store", i, d.Source)
		}
	}
	for i := range hotFirst {
		if d := mustCheck(t, g, hot); d.Source != sluice.FromStore || !d.Allowed {
			t.Fatalf("hot check %d before the failover: %v, allowed %v; want allowed by the store", i+1, d.Source, d.Allowed)
		}
	}

	var (
		mu       sync.Mutex
		total    failoverLoad
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		killed   = make(chan struct{})
		admitted = hotFirst // hot checks the store allowed
	)
	for w := range callers {
		wg.Go(func() {
			var l failoverLoad
			var d sluice.Decision
			for n := w; ; n++ {
				select {
				case <-stop:
					mu.Lock()
					total.add(l)
					mu.Unlock()
					return
				default:
				}
				i := n * 7 % nKeys
				if err := g.Check(context.Background(), checks[i], &d); err != nil {
					l.errs = append(l.errs, err)
					continue
				}
				degraded := d.Source != sluice.FromStore
				switch {
				case onVictim[i]:
					l.victim++
					if degraded {
						l.victimDegraded++
						l.lastVictimDegraded = time.Now()
					}
				default:
					l.healthy++
					if degraded {
						l.healthyDegraded++
					}
				}
			}
		})
	}
	// The hot key is checked until the store denies it, not only while the
	// load runs: on a loaded machine its last 100 checks may not fit in
	// the load's time, and the count must be exact whenever they end.
	hotDone := make(chan error, 1)
	go func() {
		<-killed
		end := time.Now().Add(hotWait)
		var d sluice.Decision
		for {
			if time.Now().After(end) {
				hotDone <- fmt.Errorf("not denied by the store within %v of the kill; %d admitted", hotWait, admitted)
				return
			}
			if err := g.Check(context.Background(), hot, &d); err != nil {
				hotDone <- err
				return
			}
			if d.Source == sluice.FromStore {
				if !d.Allowed {
					hotDone <- nil
					return
				}
				admitted++
			}
			time.Sleep(time.Millisecond)
		}
	}()

	time.Sleep(300 * time.Millisecond) // load on a healthy Cluster first
	m := c.MasterOf("hot")
	mastersBefore := addrs(c.Masters())
	if n, err := m.Do("WAIT", "1", "5000").AsInt64(); err != nil || n < 1 {
		t.Fatalf("WAIT on %s: %d replicas acknowledged (%v)", m.Addr(), n, err)
	}
	fail(c, m)
	killAt := time.Now()
	close(killed)
	c.WaitHealthy()
	healthyAt := time.Now()
	time.Sleep(after)
	close(stop)
	wg.Wait()
	if err := <-hotDone; err != nil {
		t.Fatalf("hot key: %v", err)
	}

	t.Logf("failover %v; healthy masters: %d checks, %d degraded; failed master: %d checks, %d degraded, the last %v after the Cluster was healthy; %d breaker parts",
		healthyAt.Sub(killAt).Round(time.Millisecond), total.healthy, total.healthyDegraded, total.victim, total.victimDegraded,
		total.lastVictimDegraded.Sub(healthyAt).Round(time.Millisecond), len(b.Parts()))
	// What a failure needs explained: a healthy master failed over too
	// (starved past cluster-node-timeout), and each part's breaker.
	t.Logf("masters before the failover %v, after %v (failed: %s)", mastersBefore, addrs(c.Masters()), m.Addr())
	for _, p := range b.Parts() {
		t.Logf("breaker part %q: %v, %d opens, %d errors, %d skipped", p.Name, p.State, p.Opens, p.Errors, p.Skipped)
	}
	for _, err := range total.errs {
		t.Errorf("Check: %v", err)
	}
	if total.healthyDegraded != 0 {
		t.Errorf("%d of %d checks of keys on healthy masters were decided without the store, want 0", total.healthyDegraded, total.healthy)
	}
	if total.victimDegraded == 0 {
		t.Errorf("no check of the killed master's %d keys was degraded: the kill was not seen", total.victim)
	}
	if late, bound := total.lastVictimDegraded.Sub(healthyAt), reroute+lastCall+backoff; late > bound {
		t.Errorf("the failed master's keys were decided without the store until %v after the Cluster was healthy, want at most the client's reroute, a last call and one back-off (%v)", late, bound)
	}
	for i, ck := range checks {
		if d := mustCheck(t, g, ck); d.Source != sluice.FromStore {
			t.Errorf("key %d after the failover: source %v, want the store", i, d.Source)
		}
	}
	if admitted != hotRate {
		t.Errorf("hot key: the store admitted %d checks across the failover, want exactly %d", admitted, hotRate)
	}
	peek := hot
	peek.Cost = 0
	if d := mustCheck(t, g, peek); d.Source != sluice.FromStore || d.Hits[0].Used != hotRate {
		t.Errorf("hot key after the failover: Used %v (source %v), want %d from the store", d.Hits[0].Used, d.Source, hotRate)
	}
}

// addrs returns the servers' addresses.
func addrs(servers []*redistest.Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Addr()
	}
	return out
}

// waitParts waits until the store's slot map names n masters.
func waitParts(t *testing.T, s *redisstore.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.Parts()) != n {
		s.Part(check(0, hit("any", "1r/s", sluice.SlidingWindow))) // starts a refresh when due
		if time.Now().After(deadline) {
			t.Fatalf("the store's slot map names %v, want %d masters", s.Parts(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
