package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice"
)

// downStore is a store that cannot be reached: every call fails with
// sluice.ErrUnavailable, as a Redis store does when its server is gone.
type downStore struct{}

func (downStore) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	return fmt.Errorf("test store: %w", sluice.ErrUnavailable)
}

func (downStore) Reset(ctx context.Context, c sluice.Check) error {
	return fmt.Errorf("test store: %w", sluice.ErrUnavailable)
}

const failureConfig = `
store: {url: "redis://127.0.0.1:1"}
listeners: [{addr: "127.0.0.1:0"}]
zones:
  - {name: open, limits: 5r/m}
  - {name: closed, limits: 5r/m, failure: closed}
  - {name: local, limits: 2r/m, failure: local}
`

func TestFailurePolicies(t *testing.T) {
	ts := start(t, parseConfig(t, failureConfig), Options{Store: &Store{Limiter: downStore{}}})
	check := func(zone string) (*http.Response, decision) {
		resp, raw := post(t, ts.api+"/v1/check", `{"zone":"`+zone+`","key":"k"}`)
		return resp, decodeDecision(t, raw)
	}
	if resp, d := check("open"); resp.StatusCode != http.StatusOK || d.Source != "fail-open" || len(d.Limits) != 0 {
		t.Errorf("open: status %d, %+v; want 200 from fail-open", resp.StatusCode, d)
	}
	resp, d := check("closed")
	if resp.StatusCode != http.StatusTooManyRequests || d.Source != "fail-closed" || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("closed: status %d, Retry-After %q, %+v; want 429 from fail-closed, Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"), d)
	}
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		resp, d := check("local")
		if resp.StatusCode != want || d.Source != "fallback" {
			t.Errorf("local %d: status %d, source %q; want %d from the fallback limiter", i, resp.StatusCode, d.Source, want)
		}
	}
	if got := metricValue(t, ts.api, `sluice_degraded_decisions_total{source="fail-open",zone="open"}`); got != 1 {
		t.Errorf("fail-open decisions metric %v, want 1", got)
	}
	if got := metricValue(t, ts.api, `sluice_degraded_decisions_total{source="fallback",zone="local"}`); got != 3 {
		t.Errorf("fallback decisions metric %v, want 3", got)
	}
	if got := metricValue(t, ts.api, `sluice_store_errors_total{policy="open"}`); got < 1 {
		t.Errorf("store errors metric %v, want >= 1", got)
	}
	resp, raw := get(t, ts.api+"/readyz", nil)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz: status %d (%s), want 503 while the store is down and a zone fails closed", resp.StatusCode, raw)
	}
	resp, raw = post(t, ts.api+"/v1/reset", `{"zone":"open","key":"k"}`)
	wantProblem(t, resp, raw, http.StatusServiceUnavailable, "unavailable")
}

func TestReadyWithoutClosedZones(t *testing.T) {
	cfg := parseConfig(t, "store: {url: \"redis://127.0.0.1:1\"}\nlisteners: [{addr: \"127.0.0.1:0\"}]\nzones: [{name: open, limits: 5r/m}]\n")
	ts := start(t, cfg, Options{Store: &Store{Limiter: downStore{}}})
	if resp, raw := get(t, ts.api+"/readyz", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz: status %d (%s), want 200: every zone fails open", resp.StatusCode, raw)
	}
}
