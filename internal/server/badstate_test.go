package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestBadStateByPolicy holds, in the server: foreign data
// under a check's keys (a list where sluice's state belongs) is one
// check's failure, not an outage. The API, auth_request and the proxy
// answer it by the zone's failure policy (open allows, closed denies,
// local asks the local fallback), never with 503 "store unavailable";
// the breaker stays closed, healthy keys are decided by the store, and
// /metrics counts it in sluice_bad_state_checks_total, not as a degraded
// decision. Before, every path answered 503.
func TestBadStateByPolicy(t *testing.T) {
	r := redistest.Standalone(t)
	cfg := parseConfig(t, `
store: {url: "`+r.URL()+`", timeout: 1s}
listeners: [{addr: "127.0.0.1:0"}, {addr: "127.0.0.1:0", serve: proxy}]
zones:
  - {name: open, limits: 2r/m}
  - {name: closed, limits: 5r/m, failure: closed}
  - {name: local, limits: 5r/m, failure: local}
  - {name: hdr, limits: 5r/m, failure: closed, key: "header:X-User"}
proxy:
  upstream: `+newUpstream(t).URL+`
  rules: [{path_prefix: /, zones: [hdr]}]
`)
	ts := start(t, cfg, Options{})
	check := func(zone, key string) (int, string) {
		resp, raw := post(t, ts.api+"/v1/check", `{"zone":"`+zone+`","key":"`+key+`"}`)
		return resp.StatusCode, decodeDecision(t, raw).Source
	}
	auth := func(zone string) int {
		resp, _ := get(t, ts.api+"/v1/auth?zone="+zone, map[string]string{"X-Real-Ip": "10.0.0.9"})
		return resp.StatusCode
	}
	proxied := func() int {
		resp, _ := get(t, ts.proxy+"/x", map[string]string{"X-User": "bad"})
		return resp.StatusCode
	}
	// Every key these checks write becomes a list.
	for _, z := range []string{"open", "closed", "local"} {
		check(z, "bad")
		auth(z)
	}
	proxied()
	keys, err := r.Do("KEYS", "*").AsStrSlice()
	if err != nil || len(keys) == 0 {
		t.Fatalf("KEYS: %v %v", keys, err)
	}
	for _, k := range keys {
		r.Do("DEL", k)
		r.Do("LPUSH", k, "x")
	}

	for i := range 6 { // more than the breaker's threshold (5)
		local := http.StatusOK
		if i == 5 { // the fallback limits too: 5r/m
			local = http.StatusTooManyRequests
		}
		for zone, want := range map[string]struct {
			code int
			src  string
		}{"open": {200, "fail-open"}, "closed": {429, "fail-closed"}, "local": {local, "fallback"}} {
			if code, src := check(zone, "bad"); code != want.code || src != want.src {
				t.Fatalf("API, zone %s, bad state: %d from %q, want %d from %q", zone, code, src, want.code, want.src)
			}
		}
		if code := auth("open"); code != http.StatusNoContent {
			t.Fatalf("auth_request, zone open, bad state: %d, want 204", code)
		}
		if code := auth("closed"); code != DefaultAuthDenyStatus {
			t.Fatalf("auth_request, zone closed, bad state: %d, want %d", code, DefaultAuthDenyStatus)
		}
		if code := proxied(); code != http.StatusTooManyRequests {
			t.Fatalf("proxy, closed zone, bad state: %d, want 429", code)
		}
	}
	if code, src := check("closed", "healthy"); code != http.StatusOK || src != "store" {
		t.Errorf("a healthy key after the bad ones: %d from %q, want 200 from the store", code, src)
	}
	if got := metricValue(t, ts.api, "sluice_store_breaker_open"); got != 0 {
		t.Errorf("breaker metric %v, want 0 (closed)", got)
	}
	for _, series := range []string{
		`sluice_degraded_decisions_total{source="fail-closed",zone="closed"}`,
		`sluice_degraded_decisions_total{source="fail-open",zone="open"}`,
		`sluice_store_errors_total{policy="closed"}`,
	} {
		if got := metricValue(t, ts.api, series); got > 0 {
			t.Errorf("%s = %v, want 0: bad state is not an outage", series, got)
		}
	}
	for series, want := range map[string]float64{
		`sluice_bad_state_checks_total{source="fail-closed",zone="closed"}`: 12, // 6 API, 6 auth
		`sluice_bad_state_checks_total{source="fail-open",zone="open"}`:     12,
		`sluice_bad_state_checks_total{source="fallback",zone="local"}`:     6,
		`sluice_bad_state_checks_total{source="fail-closed",zone="hdr"}`:    6,
	} {
		if got := metricValue(t, ts.api, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if strings.Contains(ts.logs.String(), "10.0.0.9") {
		t.Error("the log names a key")
	}
}
