package openresty

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestClusterSlotMigration moves the slot of a key from one master to
// another while nginx keeps its slot map: during the migration the old
// master answers ASK (the module retries on the new one after ASKING),
// after it MOVED (the module updates its map). The limit stays exact
// throughout: 5 of 9 checks admitted, the state moved with the slot. It
// then fails over the new master: the module finds the promoted replica.
func TestClusterSlotMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	n := startNginx(t, 1, harnessConf(t, ""))
	l := &luaLimiter{url: n.url, redis: c.URL(), prefix: "mig:", client: newHTTPClient()}
	const key = "migrating"
	stateKey := "mig:{" + key + "}:L3600000000"
	slot := redistest.Slot(stateKey)
	if slot != redistest.Slot(key) {
		t.Fatal("the state key is not hashed on the key")
	}
	limit := sluice.Limit{Rate: 5, Window: time.Hour, Algorithm: sluice.Log}
	chk := sluice.Check{Hits: []sluice.Hit{{Key: key, Limit: limit}}, Cost: 1}
	admitted := 0
	check := func(stage string) {
		t.Helper()
		var d sluice.Decision
		if err := l.Check(context.Background(), chk, &d); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if d.Allowed {
			admitted++
		}
	}
	check("before")
	check("before")
	src := c.MasterOf(stateKey)
	var dst *redistest.Server
	for _, m := range c.Masters() {
		if m.Addr() != src.Addr() {
			dst = m
			break
		}
	}
	id := func(s *redistest.Server) string {
		v, err := s.Do("CLUSTER", "MYID").ToString()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	srcID, dstID := id(src), id(dst)
	sl := strconv.Itoa(int(slot))
	must := func(s *redistest.Server, args ...string) {
		t.Helper()
		if err := s.Do(args...).Error(); err != nil {
			t.Fatalf("%s %v: %v", s.Addr(), args, err)
		}
	}
	must(dst, "CLUSTER", "SETSLOT", sl, "IMPORTING", srcID)
	must(src, "CLUSTER", "SETSLOT", sl, "MIGRATING", dstID)
	host, port, _ := strings.Cut(dst.Addr(), ":")
	must(src, "MIGRATE", host, port, "", "0", "5000", "KEYS", stateKey)
	check("during (ASK)")
	check("during (ASK)")
	for _, m := range c.Masters() {
		must(m, "CLUSTER", "SETSLOT", sl, "NODE", dstID)
	}
	check("after (MOVED)")
	check("after (MOVED)")
	if exists, _ := dst.Do("EXISTS", stateKey).AsInt64(); exists != 1 {
		t.Fatalf("the state is not on the new master")
	}
	c.WaitHealthy()
	c.KillMaster(stateKey)
	for i := range 3 {
		check(fmt.Sprint("after failover ", i))
	}
	if admitted != 5 {
		t.Fatalf("admitted %d of 9 on 5r/h across a slot migration and a failover, want 5", admitted)
	}
}

// TestClusterNodeFailureIsThatNodesAlone: a 3+3 Cluster, nginx of two
// workers behind the edge (breaker, policy open), 8 callers on 60 keys
// and a hot key, and the master of a third of the keys SIGKILLed. The
// breaker is per node: no key of a healthy master is decided without
// Redis, the hot key (on a healthy master) admits exactly its limit, and
// the failed master's keys are decided by Redis again within the
// failover (until the Cluster is healthy) plus one breaker back-off (at
// most breaker_max_backoff, 5 s) and a scheduling slack. The Cluster
// serves the healthy masters' slots while one is down
// (cluster-require-full-coverage no, which the per-node breaker needs: by
// default every master refuses every key until the failover ends).
func TestClusterNodeFailureIsThatNodesAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	for _, node := range c.Nodes() {
		if err := node.Do("CONFIG", "SET", "cluster-require-full-coverage", "no").Error(); err != nil {
			t.Fatal(err)
		}
	}
	n := startNginx(t, 2, harnessConf(t, breakerConf))
	// A timeout long enough that a healthy master answers in time on a
	// shared machine whose processes stall for a second now and then: the
	// test is about the node that fails, whose calls fail at once
	// (connection refused or reset), not at the timeout.
	l := &luaLimiter{url: n.url, redis: c.URL(), prefix: "nf:", edge: true, policy: "open", timeout: 3000, client: newHTTPClient()}
	const prefix = "nf:"
	stateKey := func(k string) string { return prefix + "{" + k + "}:W3600000000" }
	victim := c.MasterOf(stateKey("k0")).Addr()
	var keys []string
	onVictim := map[string]bool{}
	for i := range 60 {
		k := fmt.Sprint("k", i)
		keys = append(keys, k)
		onVictim[k] = c.MasterOf(stateKey(k)).Addr() == victim
	}
	hot := ""
	for i := 0; hot == ""; i++ {
		if k := fmt.Sprint("hot", i); c.MasterOf(stateKey(k)).Addr() != victim {
			hot = k
		}
	}
	wide := sluice.Limit{Rate: 1_000_000, Window: time.Hour}
	const hotRate = 50
	hotLimit := sluice.Limit{Rate: hotRate, Window: time.Hour}

	type result struct {
		at     time.Time
		key    string
		source sluice.Source
	}
	var (
		mu      sync.Mutex
		results []result
		hotOK   int
		stop    atomic.Bool
		wg      sync.WaitGroup
		errs    = make(chan error, 8)
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; !stop.Load(); i += 8 {
				k, lim := keys[i%len(keys)], wide
				if i%10 == 0 {
					k, lim = hot, hotLimit
				}
				var d sluice.Decision
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := l.Check(ctx, sluice.Check{Hits: []sluice.Hit{{Key: k, Limit: lim}}, Cost: 1}, &d)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				results = append(results, result{time.Now(), k, d.Source})
				if k == hot && d.Allowed {
					hotOK++
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second)
	killed := time.Now()
	c.KillMaster(stateKey("k0")) // returns once a replica is promoted and the Cluster is healthy
	healthy := time.Now()
	const backoff, slack = 5 * time.Second, 3 * time.Second
	time.Sleep(backoff + slack)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("check: %v", err)
	}

	var lastDegraded time.Time
	healthyChecks, healthyDegraded, victimChecks, victimDegraded, storeAfter := 0, 0, 0, 0, 0
	for _, r := range results {
		// The store decided, or repeated its own denial (the hot key).
		degraded := r.source != sluice.FromStore && r.source != sluice.FromDenyCache
		switch {
		case r.key == hot || !onVictim[r.key]:
			healthyChecks++
			if degraded {
				healthyDegraded++
				if healthyDegraded <= 5 {
					t.Errorf("key %s of a healthy master decided by %v at %v after the kill", r.key, r.source, r.at.Sub(killed))
				}
			}
		default:
			victimChecks++
			if degraded {
				victimDegraded++
				if r.at.After(lastDegraded) {
					lastDegraded = r.at
				}
			} else if r.at.After(healthy.Add(backoff)) {
				storeAfter++
			}
		}
	}
	t.Logf("%d checks on healthy masters (%d decided by the policy), %d on the failed one (%d decided by the policy, the last %v after the kill); failover %v",
		healthyChecks, healthyDegraded, victimChecks, victimDegraded, lastDegraded.Sub(killed), healthy.Sub(killed))
	if hotOK != hotRate {
		t.Errorf("the hot key admitted %d, want exactly its limit %d", hotOK, hotRate)
	}
	if victimDegraded == 0 {
		t.Errorf("no check on the failed master's keys was decided by the policy: the kill did not reach the module")
	}
	if !lastDegraded.IsZero() && lastDegraded.After(healthy.Add(backoff+slack/2)) {
		t.Errorf("the failed master's keys were decided by the policy until %v after the kill; the failover took %v, the back-off is at most %v",
			lastDegraded.Sub(killed), healthy.Sub(killed), backoff)
	}
	if storeAfter == 0 {
		t.Errorf("no check on the failed master's keys was decided by Redis after the failover and a back-off")
	}
}
