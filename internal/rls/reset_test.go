package rls

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
)

// TestReset checks that a domain's counter, named by the key the service
// builds for it (exact, wildcard and nested rules), is cleared by Reset
// on a real memory store, that other keys keep their counts, and that
// keys naming no counter of the rules are refused with ErrNoCounter.
func TestReset(t *testing.T) {
	dir := t.TempDir()
	rules := "domain: edge\ndescriptors:\n" +
		"  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n" +
		"  - key: path\n    value: /api/*\n    shadow_mode: false\n    rate_limit: {unit: hour, requests_per_unit: 2}\n" +
		"  - key: org\n    descriptors:\n      - key: plan\n        rate_limit: {unit: minute, requests_per_unit: 2}\n" +
		"  - key: free\n    rate_limit: {unlimited: true}\n"
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(loaded, Options{Limiter: func(config.FailurePolicy) sluice.Limiter { return ms }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	over := func(kv ...string) bool {
		t.Helper()
		d := &rlv3.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		resp, err := svc.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlv3.RateLimitDescriptor{d}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT
	}
	for _, tc := range []struct {
		name string
		kv   []string
	}{
		{"exact", []string{"user", "eve"}},
		{"wildcard", []string{"path", "/api/v1"}},
		{"nested", []string{"org", "acme", "plan", "pro"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := append([]string(nil), tc.kv...)
			other[len(other)-1] += "-other"
			for range 3 {
				over(tc.kv...)
				over(other...)
			}
			if !over(tc.kv...) || !over(other...) {
				t.Fatalf("%v, %v not over their limit after 3 requests", tc.kv, other)
			}
			var entries []entry
			for i := 0; i < len(tc.kv); i += 2 {
				entries = append(entries, entry{tc.kv[i], tc.kv[i+1]})
			}
			c, err := svc.Reset(ctx, "edge", entriesKey(entries))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Hits) != 1 || c.Hits[0].Zone != "rls/edge" {
				t.Errorf("reset check = %+v, want one hit of zone rls/edge", c)
			}
			if over(tc.kv...) {
				t.Errorf("%v over its limit after its reset", tc.kv)
			}
			if !over(other...) {
				t.Errorf("%v no longer over its limit after another key's reset", other)
			}
		})
	}
	for _, tc := range []struct{ domain, key string }{
		{"nope", entriesKey([]entry{{"user", "eve"}})},
		{"edge", "user:eve"},
		{"edge", "4:user3:ev"},
		{"edge", "04:user3:eve"},
		{"edge", entriesKey([]entry{{"other", "x"}})},
		{"edge", entriesKey([]entry{{"free", "x"}})},
		{"edge", entriesKey([]entry{{"org", "acme"}})}, // a level without a limit
		{"edge", ""},
	} {
		if _, err := svc.Reset(ctx, tc.domain, tc.key); !errors.Is(err, ErrNoCounter) {
			t.Errorf("Reset(%q, %q) = %v, want ErrNoCounter", tc.domain, tc.key, err)
		}
	}
}
