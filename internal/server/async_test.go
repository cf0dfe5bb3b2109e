package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestRedisAsyncZone: an async zone decides locally after its first check,
// shows it in /metrics, and sends everything it admitted when the server
// stops: a synchronous server on the same Redis then finds the usage.
func TestRedisAsyncZone(t *testing.T) {
	r := redistest.Standalone(t)
	// Recovery and exactness are the subject, not the timeout: on a loaded
	// machine (2 cores, load ~18, -race) a call within 100 ms failed often
	// enough to turn the first check into a fail-open one and to fail the
	// breaker's probes after the restart. With 2 s (flush calls are bounded
	// by edge.DefaultFlushTimeout, 1 s) the answers are the store's; the
	// dead Redis still fails every call at once (connection refused).
	cfg := func(mode string) string {
		return `
store: {url: "` + r.URL() + `", timeout: 2s}
listeners: [{addr: "127.0.0.1:0"}]
zones:
  - {name: a, limits: 10r/h, ` + mode + `}
`
	}
	async := start(t, parseConfig(t, cfg("mode: async, sync_interval: 1m")), Options{})
	for i, want := range []string{"store", "store", "store", "local-view"} { // a key's third answer is its view
		resp, raw := post(t, async.api+"/v1/check", `{"zone":"a","key":"k"}`)
		if d := decodeDecision(t, raw); resp.StatusCode != http.StatusOK || d.Source != want {
			t.Fatalf("check %d: %d from %q, want 200 from %q (%s)", i, resp.StatusCode, d.Source, want, raw)
		}
	}
	series := `sluice_async_decisions_total{first_sight="0",path="local",policy="open",processes="1",sync_interval="1m0s"}`
	if got := metricValue(t, async.api, series); got != 1 {
		t.Errorf("%s = %v, want 1", series, got)
	}
	series = `sluice_async_pending_cost{first_sight="0",policy="open",processes="1",sync_interval="1m0s"}`
	if got := metricValue(t, async.api, series); got != 1 {
		t.Errorf("%s = %v, want 1 (the sync interval has not passed)", series, got)
	}
	if err := async.stop(); err != nil {
		t.Fatal(err)
	}
	sync := start(t, parseConfig(t, cfg("mode: sync")), Options{})
	for i := range 7 { // 6 of the 10 remain
		want := http.StatusOK
		if i == 6 {
			want = http.StatusTooManyRequests
		}
		if resp, raw := post(t, sync.api+"/v1/check", `{"zone":"a","key":"k"}`); resp.StatusCode != want {
			t.Fatalf("check %d on the sync server: %d, want %d (%s): the async server's cost was not all sent", i, resp.StatusCode, want, raw)
		}
	}
}

// TestRedisAsyncZoneOutage kills Redis under an async zone: its checks are
// still decided from the views, the cost admitted meanwhile stays owed, and
// it is sent when Redis is back (a restarted, empty Redis: the owed cost is
// then all it holds).
func TestRedisAsyncZoneOutage(t *testing.T) {
	r := redistest.Standalone(t)
	// Recovery and exactness are the subject, not the timeout: on a loaded
	// machine (2 cores, load ~18, -race) a call within 100 ms failed often
	// enough to turn the first check into a fail-open one and to fail the
	// breaker's probes after the restart. With 2 s (flush calls are bounded
	// by edge.DefaultFlushTimeout, 1 s) the answers are the store's; the
	// dead Redis still fails every call at once (connection refused).
	cfg := func(mode string) string {
		return `
store: {url: "` + r.URL() + `", timeout: 2s}
listeners: [{addr: "127.0.0.1:0"}]
zones:
  - {name: a, limits: 10r/h, ` + mode + `}
`
	}
	async := start(t, parseConfig(t, cfg("mode: async, sync_interval: 50ms")), Options{})
	check := func(want string) {
		t.Helper()
		resp, raw := post(t, async.api+"/v1/check", `{"zone":"a","key":"k"}`)
		if d := decodeDecision(t, raw); resp.StatusCode != http.StatusOK || d.Source != want {
			t.Fatalf("%d from %q, want 200 from %q (%s)", resp.StatusCode, d.Source, want, raw)
		}
	}
	pending := `sluice_async_pending_cost{first_sight="0",policy="open",processes="1",sync_interval="50ms"}`
	// The flushes after the restart go through the breaker, which probes
	// after a back-off that doubles after each failed probe up to
	// edge.DefaultMaxBackoff (5 s): a few probes that fail while Redis
	// starts must not fail the test, hence 30 s.
	waitPending := func(want float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for metricValue(t, async.api, pending) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s = %v after 30 s, want %v", pending, metricValue(t, async.api, pending), want)
			}
			time.Sleep(20 * time.Millisecond) // polling a real process, bounded by the deadline
		}
	}
	check("store")
	check("store")
	check("store") // the third answer is the key's view
	check("local-view")
	waitPending(0)
	r.Kill()
	for range 3 {
		check("local-view")
	}
	time.Sleep(200 * time.Millisecond) // a few failed flush rounds
	if got := metricValue(t, async.api, `sluice_async_flush_errors_total{first_sight="0",policy="open",processes="1",sync_interval="50ms"}`); got <= 0 {
		t.Errorf("flush errors %v during the outage, want some", got)
	}
	waitPending(3)
	r.Restart()
	waitPending(0)
	if got := metricValue(t, async.api, `sluice_async_dropped_cost_total{first_sight="0",policy="open",processes="1",sync_interval="50ms"}`); got != 0 {
		t.Errorf("dropped %v, want 0", got)
	}
	if err := async.stop(); err != nil {
		t.Fatal(err)
	}
	sync := start(t, parseConfig(t, cfg("mode: sync")), Options{})
	for i := range 8 { // the restarted Redis holds the 3 owed units: 7 remain
		want := http.StatusOK
		if i == 7 {
			want = http.StatusTooManyRequests
		}
		if resp, raw := post(t, sync.api+"/v1/check", `{"zone":"a","key":"k"}`); resp.StatusCode != want {
			t.Fatalf("check %d on the sync server: %d, want %d (%s)", i, resp.StatusCode, want, raw)
		}
	}
}

// TestResetForgetsEveryDenyCache: a rule over two zones checks through its
// policy's deny cache; a reset of the async zone goes past that cache
// (through the zone's Async and Guard), and must still make the cache
// forget the denial, or it would deny what the store now allows.
func TestResetForgetsEveryDenyCache(t *testing.T) {
	r := redistest.Standalone(t)
	ts := start(t, parseConfig(t, `
store: {url: "`+r.URL()+`", timeout: 2s} # generous: a loaded machine must not fail the check itself
listeners: [{addr: "127.0.0.1:0"}]
admin: {open: true}
zones:
  - {name: a, limits: 2r/h, key: "header:X-User", mode: async, sync_interval: 1m}
  - {name: b, limits: 100r/h, key: "header:X-User"}
`), Options{})
	user := map[string]string{"X-User": "u"}
	for i, want := range []int{http.StatusNoContent, http.StatusNoContent, http.StatusForbidden, http.StatusForbidden} {
		if resp, raw := get(t, ts.api+"/v1/auth?zone=a&zone=b", user); resp.StatusCode != want {
			t.Fatalf("auth %d: %d, want %d (%s)", i, resp.StatusCode, want, raw)
		}
	}
	if resp, raw := post(t, ts.api+"/v1/reset", `{"zone":"a","key":"u"}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("reset: %d (%s)", resp.StatusCode, raw)
	}
	if resp, raw := get(t, ts.api+"/v1/auth?zone=a&zone=b", user); resp.StatusCode != http.StatusNoContent {
		t.Errorf("auth after the reset of zone a: %d, want 204: a deny cache still repeats the old denial (%s)", resp.StatusCode, raw)
	}
}
