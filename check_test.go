package sluice

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckValidate(t *testing.T) {
	perMinute := Limit{Rate: 10, Window: time.Minute}
	hit := func(key string, l Limit) Hit { return Hit{Key: key, Limit: l} }
	many := make([]Hit, MaxHits+1)
	for i := range many {
		many[i] = hit(strings.Repeat("k", i+1), perMinute)
	}
	logLimit := func(rate int64) Limit { return Limit{Rate: rate, Window: time.Second, Algorithm: Log} }

	ok := []struct {
		c          Check
		maxLogRate int64
	}{
		{Check{Hits: []Hit{hit("k", perMinute)}, Cost: 1}, 0},
		{Check{Hits: []Hit{hit("k", perMinute)}, Cost: 0}, 0},
		{Check{Hits: []Hit{hit("k", perMinute)}, Cost: 10}, 0},
		{Check{Hits: many[:MaxHits], Cost: 1}, 0},
		{Check{Hits: []Hit{hit(strings.Repeat("x", MaxKeyLen), perMinute)}, Cost: 1}, 0},
		{Check{Hits: []Hit{hit("k", logLimit(DefaultMaxLogRate))}, Cost: 1}, 0},
		{Check{Hits: []Hit{hit("k", logLimit(50_000))}, Cost: 1}, 50_000},
		// Same key, different identities: window, algorithm, resolution, zone.
		{Check{Hits: []Hit{hit("k", perMinute), hit("k", Limit{Rate: 5, Window: time.Hour})}, Cost: 1}, 0},
		{Check{Hits: []Hit{hit("k", perMinute), hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: Log})}, Cost: 1}, 0},
		{Check{Hits: []Hit{
			hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: Buckets}),
			hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: Buckets, Resolution: time.Second}),
		}, Cost: 1}, 0},
		{Check{Hits: []Hit{hit("k", perMinute), {Zone: "z", Key: "k", Limit: perMinute}}, Cost: 1}, 0},
	}
	for i, c := range ok {
		if err := c.c.Validate(c.maxLogRate); err != nil {
			t.Errorf("valid check %d: %v", i, err)
		}
	}

	bad := []struct {
		name       string
		c          Check
		maxLogRate int64
		why        string
	}{
		{"no hits", Check{Cost: 1}, 0, "no hits"},
		{"too many hits", Check{Hits: many, Cost: 1}, 0, "17 hits, more than 16"},
		{"negative cost", Check{Hits: []Hit{hit("k", perMinute)}, Cost: -1}, 0, "cost must be >= 0, got -1"},
		{"empty key", Check{Hits: []Hit{hit("", perMinute)}, Cost: 1}, 0, "hit 0: sluice: invalid input: empty key"},
		{"long key", Check{Hits: []Hit{hit(strings.Repeat("x", MaxKeyLen+1), perMinute)}, Cost: 1}, 0, "longer than 65536"},
		{"bad limit", Check{Hits: []Hit{hit("k", perMinute), hit("k", Limit{Rate: 0, Window: time.Second})}, Cost: 1}, 0, `hit 1: sluice: invalid input: limit "0r/s": rate must be > 0`},
		{"cost above rate", Check{Hits: []Hit{hit("k", perMinute)}, Cost: 11}, 0, `cost 11 is greater than the rate of limit "10r/m"`},
		{"log rate", Check{Hits: []Hit{hit("k", logLimit(DefaultMaxLogRate+1))}, Cost: 1}, 0, "a log limit's rate must be <= 10000"},
		{"custom log rate", Check{Hits: []Hit{hit("k", logLimit(101))}, Cost: 1}, 100, "a log limit's rate must be <= 100"},
		{"shared state", Check{Hits: []Hit{hit("k", perMinute), hit("k", Limit{Rate: 99, Window: time.Minute, Name: "other"})}, Cost: 1}, 0,
			`hits 0 and 1 share state (zone "", key "k", sliding-window 1m0s)`},
		{"shared default algorithm", Check{Hits: []Hit{hit("k", perMinute), hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: SlidingWindow})}, Cost: 1}, 0, "share state"},
		{"shared default resolution", Check{Hits: []Hit{
			hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: Buckets}),
			hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: Buckets, Resolution: 6 * time.Second}),
		}, Cost: 1}, 0, "share state"},
	}
	for _, c := range bad {
		err := c.c.Validate(c.maxLogRate)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: Validate() = %v, want ErrInvalid saying %q", c.name, err, c.why)
		}
	}
}

func TestDecisionReset(t *testing.T) {
	d := Decision{Allowed: true, Denier: 3, Shadowed: true, Source: FromFailOpen, Hits: []HitResult{{Used: 5}, {Used: 6}}}
	storage := &d.Hits[0]
	d.Reset(2)
	if d.Allowed || d.Denier != -1 || d.Shadowed || d.Source != FromStore || len(d.Hits) != 2 {
		t.Fatalf("after Reset(2): %+v", d)
	}
	if &d.Hits[0] != storage || d.Hits[0] != (HitResult{}) || d.Hits[1] != (HitResult{}) {
		t.Errorf("Reset did not clear and reuse the hit storage: %+v", d.Hits)
	}
	d.Reset(3)
	if len(d.Hits) != 3 {
		t.Errorf("Reset(3): %d hits", len(d.Hits))
	}
	if n := testing.AllocsPerRun(100, func() { d.Reset(3) }); n != 0 {
		t.Errorf("Reset within capacity allocates %v times", n)
	}
}

func TestDecisionRetryAfter(t *testing.T) {
	d := Decision{Allowed: true, Denier: -1, Hits: []HitResult{{Allowed: true}}}
	if got := d.RetryAfter(); got != 0 {
		t.Errorf("allowed: RetryAfter %v, want 0", got)
	}
	d = Decision{Denier: 1, Hits: []HitResult{
		{RetryAfter: 2 * time.Second},
		{RetryAfter: 5 * time.Second},
		{Shadow: true, RetryAfter: time.Hour},
		{Allowed: true},
	}}
	if got := d.RetryAfter(); got != 5*time.Second {
		t.Errorf("denied: RetryAfter %v, want the longest non-shadow wait, 5s", got)
	}
}

func TestSource(t *testing.T) {
	for s, want := range map[Source]struct {
		name     string
		degraded bool
	}{
		FromStore:      {"store", false},
		FromDenyCache:  {"deny-cache", false},
		FromLocalView:  {"local-view", false},
		FromFailOpen:   {"fail-open", true},
		FromFailClosed: {"fail-closed", true},
		FromFallback:   {"fallback", true},
		Source(42):     {"Source(42)", true},
	} {
		if s.String() != want.name || s.Degraded() != want.degraded {
			t.Errorf("Source %d: %q degraded %v, want %q %v", s, s.String(), s.Degraded(), want.name, want.degraded)
		}
	}
}
