package server

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestClusterNodeBreaker: on a Redis Cluster, the server's breaker keeps a
// state per master. With one master killed, its keys are decided by the
// failure policy and its breaker opens, exported by the master's address;
// a key of another master is still decided by the store, and the other
// masters' breakers stay closed.
func TestClusterNodeBreaker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewClusterArgs(t, "--cluster-require-full-coverage", "no")
	ts := start(t, parseConfig(t, redisConfig(t, c.URL())), Options{})
	check := func(key string) string {
		resp, raw := post(t, ts.api+"/v1/check", `{"zone":"local","key":"`+key+`"}`)
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("check %q: status %d (%s)", key, resp.StatusCode, raw)
		}
		return decodeDecision(t, raw).Source
	}
	owners := c.SlotMasters()
	victim := owners[redistest.Slot("victim")]
	healthy := "healthy"
	for i := 0; owners[redistest.Slot(healthy)] == victim; i++ {
		healthy = fmt.Sprint("healthy-", i)
	}
	nodeOpen := func(addr string) float64 {
		return metricValue(t, ts.api, `sluice_store_node_breaker_open{node="`+addr+`"}`)
	}
	// The store reads its slot map at the first check; a master's breaker
	// state is made at the first check of its keys after that.
	deadline := time.Now().Add(10 * time.Second)
	for nodeOpen(victim) != 0 || nodeOpen(owners[redistest.Slot(healthy)]) != 0 {
		for _, key := range []string{healthy, "victim"} {
			if src := check(key); src != "store" {
				t.Fatalf("before the kill: source %q, want store", src)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no per-master breaker metrics 10 s after the first check")
		}
		time.Sleep(10 * time.Millisecond) // polling a real process, bounded by the deadline
	}
	c.MasterOf("victim").Kill()
	for range 6 { // enough consecutive failures to open the victim's breaker
		if src := check("victim"); src != "fallback" {
			t.Errorf("the killed master's key: source %q, want fallback", src)
		}
	}
	if src := check(healthy); src != "store" {
		t.Errorf("a healthy master's key with another master killed: source %q, want store", src)
	}
	for addr, want := range map[string]float64{victim: 1, owners[redistest.Slot(healthy)]: 0} {
		if got := nodeOpen(addr); got != want {
			t.Errorf("sluice_store_node_breaker_open{node=%q} = %v, want %v", addr, got, want)
		}
	}
	if got := metricValue(t, ts.api, `sluice_store_node_breaker_opens_total{node="`+victim+`"}`); got != 1 {
		t.Errorf("the killed master's breaker opened %v times, want 1", got)
	}
	if got := metricValue(t, ts.api, `sluice_store_breaker_open`); got != 1 {
		t.Errorf("sluice_store_breaker_open = %v, want 1 (a master's breaker is open)", got)
	}
}
