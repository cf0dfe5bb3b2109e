package rls_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/redistest"
)

func TestRedisCluster(t *testing.T) {
	cluster := redistest.NewCluster(t)
	// A store timeout long enough that no check on a loaded machine is
	// decided by the failure policy (which would answer OK unrecorded).
	r := start(t, map[string]string{"messaging.yaml": example2, "api.yaml": apiRules}, rigOptions{store: cluster.URL(), storeTimeout: 2 * time.Second})
	// Nested descriptors whose keys fall in different slots: still all or
	// nothing (the store refunds across slots).
	for n := range 5 {
		resp := r.ask("messaging", desc("message_type", "marketing", "to_number", "1"), desc("to_number", "1"))
		if resp.OverallCode != codeOK {
			t.Fatalf("request %d: %v, want OK", n, resp)
		}
	}
	resp := r.ask("messaging", desc("message_type", "marketing", "to_number", "1"), desc("to_number", "1"))
	if resp.OverallCode != codeOver || resp.Statuses[0].Code != codeOver || resp.Statuses[1].LimitRemaining != 95 {
		t.Fatalf("sixth: %v, want OVER_LIMIT with to_number at 95 remaining", resp)
	}
	// The wildcard and hits_addend on Redis.
	resp = r.call(&pb.RateLimitRequest{Domain: "api", HitsAddend: 3, Descriptors: []*pbDesc{desc("user", "u", "path", "/search/x")}})
	if resp.OverallCode != codeOK || resp.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("addend 3 of 3: %v, want OK with 0 remaining", resp)
	}
	if resp := r.ask("api", desc("user", "u", "path", "/search/x")); resp.OverallCode != codeOver {
		t.Fatalf("next search: %v, want OVER_LIMIT", resp)
	}
}

func TestFailurePolicyRedisDown(t *testing.T) {
	redis := redistest.Standalone(t)
	rules := map[string]string{
		"open.yaml":   "domain: open\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n",
		"closed.yaml": "domain: closed\nfailure: closed\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n",
	}
	// A timeout long enough that a loaded machine running -race does not
	// fail the calls made while Redis is up.
	const timeout = 500 * time.Millisecond
	r := start(t, rules, rigOptions{store: redis.URL(), storeTimeout: timeout})
	for _, d := range []string{"open", "closed"} {
		if resp := r.ask(d, desc("k", "v")); resp.OverallCode != codeOK {
			t.Fatalf("%s with Redis up: %v", d, resp)
		}
	}
	redis.Kill()
	// Every answer must come within the store timeout (and some slack),
	// decided by the domain's failure policy.
	for range 3 {
		for _, d := range []string{"open", "closed"} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			resp, err := r.client.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: d, Descriptors: []*pbDesc{desc("k", "v")}})
			took := time.Since(start)
			cancel()
			if took > timeout+time.Second {
				t.Errorf("%s: answered in %v, want within the store timeout %v", d, took, timeout)
			}
			switch d {
			case "open":
				if err != nil || resp.OverallCode != codeOK {
					t.Errorf("open with Redis down: %v %v, want OK", resp, err)
				}
			case "closed":
				if err == nil && resp.OverallCode != codeOver || err != nil && status.Code(err) != codes.Unavailable {
					t.Errorf("closed with Redis down: %v %v, want OVER_LIMIT or Unavailable", resp, err)
				}
			}
		}
	}
	r.wantMetric(`sluice_rls_degraded_decisions_total{domain="open",source="fail-open"} 3`)
	r.wantMetric(`sluice_rls_degraded_decisions_total{domain="closed",source="fail-closed"} 3`)
	if !strings.Contains(r.log.String(), "decided without the store") {
		t.Errorf("no log line about the degraded decisions; log:\n%s", r.log.String())
	}
}

func TestReadyzFailsWithAClosedDomain(t *testing.T) {
	redis := redistest.Standalone(t)
	r := start(t, map[string]string{"closed.yaml": "domain: closed\nfailure: closed\n"}, rigOptions{store: redis.URL(), storeTimeout: time.Second})
	if code := httpStatus(t, r.api+"/readyz"); code != 200 {
		t.Fatalf("/readyz with Redis up: %d", code)
	}
	redis.Kill()
	if code := httpStatus(t, r.api+"/readyz"); code != 503 {
		t.Errorf("/readyz with Redis down and a closed domain: %d, want 503", code)
	}
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
