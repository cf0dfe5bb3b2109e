package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

func redisConfig(t *testing.T, url string) string {
	t.Helper()
	return `
store: {url: "` + url + `", timeout: 1s}
listeners: [{addr: "127.0.0.1:0"}]
admin: {open: true}
zones:
  - {name: open, limits: 2r/m}
  - {name: closed, limits: 5r/m, failure: closed}
  - {name: local, limits: 5r/m, failure: local}
`
}

// TestRedisSharedAcrossServers: two servers on one Redis share their
// counters, which is the point of a Redis store.
func TestRedisSharedAcrossServers(t *testing.T) {
	r := redistest.Standalone(t)
	a := start(t, parseConfig(t, redisConfig(t, r.URL())), Options{})
	b := start(t, parseConfig(t, redisConfig(t, r.URL())), Options{})
	for i, base := range []string{a.api, b.api, a.api} {
		resp, raw := post(t, base+"/v1/check", `{"zone":"open","key":"shared"}`)
		want := http.StatusOK
		if i == 2 {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Fatalf("check %d: status %d, want %d (%s)", i, resp.StatusCode, want, raw)
		}
		if d := decodeDecision(t, raw); d.Source != "store" {
			t.Errorf("check %d: source %q, want store", i, d.Source)
		}
	}
}

// TestRedisOutage kills Redis under a running server: each zone follows
// its failure policy, /readyz reports the closed zone, and exact limiting
// resumes by itself when Redis is back.
func TestRedisOutage(t *testing.T) {
	r := redistest.Standalone(t)
	ts := start(t, parseConfig(t, redisConfig(t, r.URL())), Options{})
	source := func(zone string) (int, string) {
		resp, raw := post(t, ts.api+"/v1/check", `{"zone":"`+zone+`","key":"k"}`)
		return resp.StatusCode, decodeDecision(t, raw).Source
	}
	if code, src := source("open"); code != http.StatusOK || src != "store" {
		t.Fatalf("before the outage: %d from %q", code, src)
	}
	r.Kill()
	for zone, want := range map[string]struct {
		code int
		src  string
	}{"open": {200, "fail-open"}, "closed": {429, "fail-closed"}, "local": {200, "fallback"}} {
		if code, src := source(zone); code != want.code || src != want.src {
			t.Errorf("%s during the outage: %d from %q, want %d from %q", zone, code, src, want.code, want.src)
		}
	}
	if resp, raw := get(t, ts.api+"/readyz", nil); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(raw), "unreachable") {
		t.Errorf("/readyz during the outage: %d %s, want 503", resp.StatusCode, raw)
	}
	if got := metricValue(t, ts.api, `sluice_degraded_decisions_total{source="fail-closed",zone="closed"}`); got != 1 {
		t.Errorf("fail-closed metric %v, want 1", got)
	}
	for range 5 { // enough consecutive failures to open the breaker
		source("open")
	}
	if got := metricValue(t, ts.api, `sluice_store_breaker_open`); got != 1 {
		t.Errorf("breaker metric %v, want 1 (open)", got)
	}
	resp, raw := post(t, ts.api+"/v1/reset", `{"zone":"open","key":"k"}`)
	if p := wantProblem(t, resp, raw, http.StatusServiceUnavailable, "unavailable"); strings.Contains(p.Detail, "127.0.0.1") || strings.Contains(p.Detail, "redisstore") {
		t.Errorf("503 detail %q names the store's address or package", p.Detail)
	}

	r.Restart()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, src := source("closed")
		if src == "store" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checks still decided by %q 15 s after Redis came back", src)
		}
		time.Sleep(50 * time.Millisecond) // polling a real process, bounded by the deadline
	}
	if resp, raw := get(t, ts.api+"/readyz", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz after the outage: %d %s, want 200", resp.StatusCode, raw)
	}
}

// TestReadyWithoutClosedZones: with every zone failing open or local, a
// lost store degrades decisions but does not make the server unready.
func TestReadyWithoutClosedZones(t *testing.T) {
	r := redistest.Standalone(t)
	cfg := parseConfig(t, "store: {url: \""+r.URL()+"\"}\nlisteners: [{addr: \"127.0.0.1:0\"}]\nzones: [{name: open, limits: 5r/m}]\n")
	ts := start(t, cfg, Options{})
	ts.waitReady(t)
	r.Kill()
	if resp, raw := get(t, ts.api+"/readyz", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz: status %d (%s), want 200: every zone fails open", resp.StatusCode, raw)
	}
}

func TestOpenStoreErrors(t *testing.T) {
	cfg := parseConfig(t, redisConfig(t, "redis://127.0.0.1:1"))
	if _, err := OpenStore(cfg.Store, nil); err == nil || !strings.Contains(err.Error(), "server: redis store:") {
		t.Errorf("OpenStore of a closed port: %v, want a redis store error", err)
	}
}
