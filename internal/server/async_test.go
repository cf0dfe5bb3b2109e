package server

import (
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestRedisAsyncZone: an async zone decides locally after its first check,
// shows it in /metrics, and sends everything it admitted when the server
// stops: a synchronous server on the same Redis then finds the usage.
func TestRedisAsyncZone(t *testing.T) {
	r := redistest.Standalone(t)
	cfg := func(mode string) string {
		return `
store: {url: "` + r.URL() + `", timeout: 100ms}
listeners: [{addr: "127.0.0.1:0"}]
zones:
  - {name: a, limits: 10r/h, ` + mode + `}
`
	}
	async := start(t, parseConfig(t, cfg("mode: async, sync_interval: 1m")), Options{})
	for i, want := range []string{"store", "local-view", "local-view"} {
		resp, raw := post(t, async.api+"/v1/check", `{"zone":"a","key":"k"}`)
		if d := decodeDecision(t, raw); resp.StatusCode != http.StatusOK || d.Source != want {
			t.Fatalf("check %d: %d from %q, want 200 from %q (%s)", i, resp.StatusCode, d.Source, want, raw)
		}
	}
	series := `sluice_async_decisions_total{path="local",policy="open",processes="1",sync_interval="1m0s"}`
	if got := metricValue(t, async.api, series); got != 2 {
		t.Errorf("%s = %v, want 2", series, got)
	}
	series = `sluice_async_pending_cost{policy="open",processes="1",sync_interval="1m0s"}`
	if got := metricValue(t, async.api, series); got != 2 {
		t.Errorf("%s = %v, want 2 (the sync interval has not passed)", series, got)
	}
	if err := async.stop(); err != nil {
		t.Fatal(err)
	}
	sync := start(t, parseConfig(t, cfg("mode: sync")), Options{})
	for i := range 8 { // 7 of the 10 remain
		want := http.StatusOK
		if i == 7 {
			want = http.StatusTooManyRequests
		}
		if resp, raw := post(t, sync.api+"/v1/check", `{"zone":"a","key":"k"}`); resp.StatusCode != want {
			t.Fatalf("check %d on the sync server: %d, want %d (%s): the async server's cost was not all sent", i, resp.StatusCode, want, raw)
		}
	}
}
