package rls_test

import (
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// TestLongUnits: week, month and year load as envoyproxy/ratelimit's code
// reads them (utils.UnitToDivider: fixed 7, 30 and 365 days), each a
// sliding window of that length, reported in current_limit.
func TestLongUnits(t *testing.T) {
	r := start(t, map[string]string{"long.yaml": `
domain: long
descriptors:
  - key: week
    rate_limit: {unit: week, requests_per_unit: 2}
  - key: month
    rate_limit: {unit: Month, requests_per_unit: 2}
  - key: year
    rate_limit: {unit: YEAR, requests_per_unit: 2}
`}, rigOptions{})
	const day = 24 * time.Hour
	for _, tc := range []struct {
		key  string
		unit pb.RateLimitResponse_RateLimit_Unit
		len  time.Duration
	}{
		{"week", pb.RateLimitResponse_RateLimit_WEEK, 7 * day},
		{"month", pb.RateLimitResponse_RateLimit_MONTH, 30 * day},
		{"year", pb.RateLimitResponse_RateLimit_YEAR, 365 * day},
	} {
		t.Run(tc.key, func(t *testing.T) {
			// To the start of a window: windows are aligned on the Unix epoch.
			r.clock.Advance(tc.len - time.Duration(r.clock.Now().UnixNano())%tc.len)
			if got := r.askN(3, "long", desc(tc.key, "a")); got != 2 {
				t.Fatalf("%d of 3 OK, want 2", got)
			}
			resp := r.ask("long", desc(tc.key, "a"))
			if st := resp.Statuses[0]; st.CurrentLimit.GetUnit() != tc.unit || st.Code != codeOver {
				t.Fatalf("%v, want OVER_LIMIT with unit %v", st, tc.unit)
			}
			if d := resp.Statuses[0].DurationUntilReset.AsDuration(); d <= tc.len-2*day || d > 2*tc.len {
				t.Errorf("duration_until_reset %v, want about one %s", d, tc.key)
			}
			r.clock.Advance(tc.len - day)
			if resp := r.ask("long", desc(tc.key, "a")); resp.OverallCode != codeOver {
				t.Errorf("a day before the %s ends: %v, want OVER_LIMIT", tc.key, resp.OverallCode)
			}
			r.clock.Advance(tc.len + 2*day) // the window after next: the first no longer weighs
			if resp := r.ask("long", desc(tc.key, "a")); resp.OverallCode != codeOK {
				t.Errorf("two %ss later: %v, want OK", tc.key, resp.OverallCode)
			}
		})
	}
}
