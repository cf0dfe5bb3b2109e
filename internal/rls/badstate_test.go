package rls_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestBadStateByPolicy holds, for gRPC and /json: foreign
// data under a descriptor's key (a list where sluice's state belongs) is
// one check's failure, not an outage: the domain's failure policy decides
// it (open OK, closed OVER_LIMIT, local the local fallback), never
// UNAVAILABLE, which Envoy's default failure_mode_deny: false lets through
// under every policy. It is counted in sluice_rls_bad_state_checks_total,
// not as a degraded decision, and the breaker stays closed.
func TestBadStateByPolicy(t *testing.T) {
	redis := redistest.Standalone(t)
	rules := map[string]string{
		"open.yaml":   "domain: open\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
		"closed.yaml": "domain: closed\nfailure: closed\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
		"local.yaml":  "domain: local\nfailure: local\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
	}
	r := start(t, rules, rigOptions{store: redis.URL(), storeTimeout: 2 * time.Second})
	for _, d := range []string{"open", "closed", "local"} {
		if resp := r.ask(d, desc("k", "v")); resp.OverallCode != codeOK {
			t.Fatalf("%s before the foreign data: %v", d, resp)
		}
	}
	keys, err := redis.Do("KEYS", "*").AsStrSlice()
	if err != nil || len(keys) == 0 {
		t.Fatalf("KEYS: %v %v", keys, err)
	}
	for _, k := range keys {
		redis.Do("DEL", k)
		redis.Do("LPUSH", k, "x")
	}
	for i := range 6 { // more than the breaker's threshold (5)
		local := codeOK
		if i == 5 { // the fallback limits too: 5 a minute
			local = codeOver
		}
		for d, want := range map[string]pb.RateLimitResponse_Code{"open": codeOK, "closed": codeOver, "local": local} {
			if resp := r.ask(d, desc("k", "v")); resp.OverallCode != want {
				t.Fatalf("%s, request %d, bad state: %v, want %v", d, i, resp.OverallCode, want)
			}
		}
	}
	resp, err := http.Post(r.api+"/json", "application/json", strings.NewReader(`{"domain":"closed","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("/json, closed, bad state: %d, want 429", resp.StatusCode)
	}
	if resp := r.ask("open", desc("k", "healthy")); resp.OverallCode != codeOK {
		t.Errorf("a healthy key after the bad ones: %v", resp)
	}
	r.wantMetric(`sluice_rls_bad_state_checks_total{domain="closed",source="fail-closed"} 7`)
	r.wantMetric(`sluice_rls_bad_state_checks_total{domain="open",source="fail-open"} 6`)
	r.wantMetric(`sluice_rls_bad_state_checks_total{domain="local",source="fallback"} 6`)
	r.wantMetric(`sluice_store_breaker_open 0`)
	if m := r.metrics(); strings.Contains(m, "sluice_rls_degraded_decisions_total{") {
		t.Errorf("bad state counted as a degraded decision:\n%s", m)
	}
}
