package httpfields_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpfields"
)

// TestPolicyIDsUnique: two hits with the same
// label (two zones with equal limits, or several keys of one zone) get
// distinct identifiers in RateLimit-Policy, RateLimit and
// violated-policies alike.
func TestPolicyIDsUnique(t *testing.T) {
	ten := sluice.Limit{Rate: 10, Window: time.Minute}
	named := sluice.Limit{Name: "10r/m", Rate: 20, Window: time.Hour}
	for _, tt := range []struct {
		name              string
		hits              []sluice.Hit
		policy, ratelimit string
	}{
		{"unique labels unchanged",
			[]sluice.Hit{{Zone: "a", Key: "k", Limit: ten}, {Zone: "a", Key: "k", Limit: sluice.Limit{Rate: 5, Window: time.Hour}}},
			`"10r/m";q=10;w=60, "5r/h";q=5;w=3600`, `"10r/m";r=0;t=6, "5r/h";r=0;t=6`},
		{"two zones, equal specs",
			[]sluice.Hit{{Zone: "a", Key: "k", Limit: ten}, {Zone: "b", Key: "k", Limit: ten}},
			`"a/10r/m";q=10;w=60, "b/10r/m";q=10;w=60`, `"a/10r/m";r=0;t=6, "b/10r/m";r=0;t=6`},
		{"a name equal to another's spec",
			[]sluice.Hit{{Zone: "a", Key: "k", Limit: ten}, {Zone: "b", Key: "k", Limit: named}},
			`"a/10r/m";q=10;w=60, "b/10r/m";q=20;w=3600`, `"a/10r/m";r=0;t=6, "b/10r/m";r=0;t=6`},
		{"one zone, two keys",
			[]sluice.Hit{{Zone: "a", Key: "k1", Limit: ten}, {Zone: "a", Key: "k2", Limit: ten}, {Zone: "a", Key: "k3", Limit: ten}},
			`"a/10r/m";q=10;w=60, "a/10r/m#2";q=10;w=60, "a/10r/m#3";q=10;w=60`, `"a/10r/m";r=0;t=6, "a/10r/m#2";r=0;t=6, "a/10r/m#3";r=0;t=6`},
		{"no zone",
			[]sluice.Hit{{Key: "k1", Limit: ten}, {Key: "k2", Limit: ten}},
			`"10r/m";q=10;w=60, "10r/m#2";q=10;w=60`, `"10r/m";r=0;t=6, "10r/m#2";r=0;t=6`},
		{"a shadow hit does not count",
			[]sluice.Hit{{Zone: "a", Key: "k", Limit: ten}, {Zone: "b", Key: "k", Limit: sluice.Limit{Rate: 10, Window: time.Minute, Shadow: true}}},
			`"10r/m";q=10;w=60`, `"10r/m";r=0;t=6`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := sluice.Check{Cost: 1, Hits: tt.hits}
			results := make([]sluice.HitResult, len(tt.hits))
			for i := range results {
				results[i] = sluice.HitResult{Allowed: false, Shadow: tt.hits[i].Limit.Shadow, RetryAfter: 6 * time.Second}
			}
			d := decided(results...)
			if got := string(httpfields.AppendPolicy(nil, c)); got != tt.policy {
				t.Errorf("RateLimit-Policy %s, want %s", got, tt.policy)
			}
			if got := string(httpfields.AppendRateLimit(nil, c, d)); got != tt.ratelimit {
				t.Errorf("RateLimit %s, want %s", got, tt.ratelimit)
			}
			w := httptest.NewRecorder()
			httpfields.WriteDenied(w, 429, c, d)
			if w.Header().Get(httpfields.FieldPolicy) != tt.policy {
				t.Errorf("WriteDenied's RateLimit-Policy %s, want %s", w.Header().Get(httpfields.FieldPolicy), tt.policy)
			}
			// Every violated policy is an item of the policy field.
			for _, id := range decodeProblem(t, w.Body.Bytes()).ViolatedPolicies {
				if !containsItem(tt.policy, id) {
					t.Errorf("violated policy %q is not an item of %s", id, tt.policy)
				}
			}
		})
	}
}

func containsItem(field, id string) bool {
	for part := range strings.SplitSeq(field, ", ") {
		if name, _, _ := strings.Cut(part, ";"); name == `"`+id+`"` {
			return true
		}
	}
	return false
}

func decodeProblem(t *testing.T, raw []byte) (p struct {
	ViolatedPolicies []string `json:"violated-policies"`
}) {
	t.Helper()
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("problem %s: %v", raw, err)
	}
	if len(p.ViolatedPolicies) == 0 {
		t.Errorf("problem %s: no violated-policies", raw)
	}
	return p
}
