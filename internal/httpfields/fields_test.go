package httpfields_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpfields"
)

func TestCeilSeconds(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want int64
	}{
		{0, 0}, {-time.Second, 0}, {time.Nanosecond, 1}, {time.Second, 1},
		{time.Second + time.Microsecond, 2}, {714 * time.Millisecond, 1}, {66 * time.Second, 66},
	}
	for _, tt := range tests {
		if got := httpfields.CeilSeconds(tt.in); got != tt.want {
			t.Errorf("CeilSeconds(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestFieldValues(t *testing.T) {
	c := sluice.Check{Cost: 1, Hits: []sluice.Hit{
		{Key: "k", Limit: sluice.Limit{Rate: 10, Window: time.Minute}},
		{Key: "k", Limit: sluice.Limit{Name: `day "quota"`, Rate: 1000, Window: 24 * time.Hour}},
		{Key: "k", Limit: sluice.Limit{Name: "trial", Rate: 1, Window: time.Second, Shadow: true}},
		{Key: "k", Limit: sluice.Limit{Name: "half\u00e9", Rate: 5, Window: 1500 * time.Millisecond}},
	}}
	d := decided(
		sluice.HitResult{Allowed: false, Used: 10, Remaining: 0, RetryAfter: 11200 * time.Millisecond, ResetAfter: 2 * time.Minute},
		sluice.HitResult{Allowed: true, Used: 500, Remaining: 500, ResetAfter: 23 * time.Hour},
		sluice.HitResult{Allowed: false, Shadow: true, Used: 1, RetryAfter: time.Second},
		sluice.HitResult{Allowed: true, Used: 0, Remaining: 5, ResetAfter: 0},
	)
	if got, want := string(httpfields.AppendPolicy(nil, c)), `"10r/m";q=10;w=60, "day \"quota\"";q=1000;w=86400, "half??";q=5;w=2`; got != want {
		t.Errorf("policy:\n got %s\nwant %s", got, want)
	}
	if got, want := string(httpfields.AppendRateLimit(nil, c, d)), `"10r/m";r=0;t=12, "day \"quota\"";r=500;t=82800, "half??";r=5;t=0`; got != want {
		t.Errorf("ratelimit:\n got %s\nwant %s", got, want)
	}
	// A decision taken by a failure policy has no hit results: no field.
	if got := httpfields.AppendRateLimit(nil, c, &sluice.Decision{Allowed: true, Source: sluice.FromFailOpen}); len(got) != 0 {
		t.Errorf("degraded decision: got %q, want nothing", got)
	}
	c.Shadow = true
	if got := httpfields.AppendPolicy(nil, c); len(got) != 0 {
		t.Errorf("all-shadow check: got %q, want nothing", got)
	}
}

func TestWriteDenied(t *testing.T) {
	c := sluice.Check{Cost: 1, Hits: []sluice.Hit{
		{Key: "secret-token", Limit: sluice.Limit{Name: "burst", Rate: 2, Window: time.Second}},
		{Key: "secret-token", Limit: sluice.Limit{Name: "hourly", Rate: 100, Window: time.Hour}},
	}}
	d := decided(
		sluice.HitResult{Remaining: 0, RetryAfter: 300 * time.Millisecond, ResetAfter: time.Second},
		sluice.HitResult{Allowed: true, Remaining: 50, ResetAfter: time.Hour},
	)
	w := httptest.NewRecorder()
	httpfields.WriteDenied(w, http.StatusTooManyRequests, c, d)
	res := w.Result()
	if res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("status %d, want 429", res.StatusCode)
	}
	for field, want := range map[string]string{
		"Retry-After":      "1",
		"RateLimit":        `"burst";r=0;t=1, "hourly";r=50;t=3600`,
		"RateLimit-Policy": `"burst";q=2;w=1, "hourly";q=100;w=3600`,
		"Content-Type":     "application/problem+json",
	} {
		if got := res.Header.Get(field); got != want {
			t.Errorf("%s: got %q, want %q", field, got, want)
		}
	}
	var p map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	if p["type"] != httpfields.QuotaExceeded || p["status"] != 429.0 {
		t.Errorf("body %v: wrong type or status", p)
	}
	if v, _ := p["violated-policies"].([]any); len(v) != 1 || v[0] != "burst" {
		t.Errorf("violated-policies: got %v, want [burst]", p["violated-policies"])
	}
	if body := w.Body.String(); strings.Contains(body, "secret-token") {
		t.Errorf("body leaks the key: %s", body)
	}
}

func TestProblemJSONEscaping(t *testing.T) {
	p := httpfields.Problem{Title: "t\"<\x01>\u2028", Status: 400, Detail: "bad \xff utf-8 ü"}
	var got map[string]any
	if err := json.Unmarshal(p.AppendJSON(nil), &got); err != nil {
		t.Fatalf("%s: %v", p.AppendJSON(nil), err)
	}
	if got["title"] != "t\"<\x01>\u2028" || got["detail"] != "bad \ufffd utf-8 ü" || got["type"] != "about:blank" {
		t.Errorf("round trip: got %v", got)
	}
}

// decided returns the decision a store reaches with these hit results.
func decided(hits ...sluice.HitResult) *sluice.Decision {
	d := new(sluice.Decision)
	d.Prepare(len(hits))
	copy(d.Hits, hits)
	d.Conclude(sluice.FromStore)
	return d
}
