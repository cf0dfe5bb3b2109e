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

	ok := []Check{
		{Hits: []Hit{hit("k", perMinute)}, Cost: 1},
		{Hits: []Hit{hit("k", perMinute)}, Cost: 0},
		{Hits: []Hit{hit("k", perMinute)}, Cost: 10},
		{Hits: many[:MaxHits], Cost: 1},
		{Hits: []Hit{hit(strings.Repeat("x", MaxKeyLen), perMinute)}, Cost: 1},
		{Hits: []Hit{hit("k", logLimit(MaxLogRate))}, Cost: 1},
		// Same key, different identities: window, algorithm, resolution, zone.
		{Hits: []Hit{hit("k", perMinute), hit("k", Limit{Rate: 5, Window: time.Hour})}, Cost: 1},
		{Hits: []Hit{hit("k", perMinute), hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: Log})}, Cost: 1},
		{Hits: []Hit{
			hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: Buckets}),
			hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: Buckets, Resolution: time.Second}),
		}, Cost: 1},
		{Hits: []Hit{hit("k", perMinute), {Zone: "z", Key: "k", Limit: perMinute}}, Cost: 1},
	}
	for i, c := range ok {
		if err := c.Validate(); err != nil {
			t.Errorf("valid check %d: %v", i, err)
		}
	}

	bad := []struct {
		name string
		c    Check
		why  string
	}{
		{"no hits", Check{Cost: 1}, "no hits"},
		{"too many hits", Check{Hits: many, Cost: 1}, "17 hits, more than 16"},
		{"negative cost", Check{Hits: []Hit{hit("k", perMinute)}, Cost: -1}, "sluice: invalid input: cost must be >= 0, got -1"},
		{"empty key", Check{Hits: []Hit{hit("", perMinute)}, Cost: 1}, "sluice: invalid input: hit 0: empty key"},
		{"long key", Check{Hits: []Hit{hit(strings.Repeat("x", MaxKeyLen+1), perMinute)}, Cost: 1}, "longer than 65536"},
		{"bad limit", Check{Hits: []Hit{hit("k", perMinute), hit("k", Limit{Rate: 0, Window: time.Second})}, Cost: 1}, `sluice: invalid input: hit 1: limit "0r/s": rate must be > 0`},
		{"cost above rate", Check{Hits: []Hit{hit("k", perMinute)}, Cost: 11}, `hit 0: cost 11 is greater than the rate of limit "10r/m"`},
		{"log rate", Check{Hits: []Hit{hit("k", logLimit(MaxLogRate+1))}, Cost: 1}, "a log limit's rate must be <= 10000"},
		{"shared state", Check{Hits: []Hit{hit("k", perMinute), hit("k", Limit{Rate: 99, Window: time.Minute, Name: "other"})}, Cost: 1},
			`hits 0 and 1 share state (zone "", key sha256:8254c329a92850f6, sliding-window 1m0s)`},
		{"shared default algorithm", Check{Hits: []Hit{hit("k", perMinute), hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: SlidingWindow})}, Cost: 1}, "share state"},
		{"shared default resolution", Check{Hits: []Hit{
			hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: Buckets}),
			hit("k", Limit{Rate: 10, Window: time.Minute, Algorithm: Buckets, Resolution: 6 * time.Second}),
		}, Cost: 1}, "share state"},
	}
	for _, c := range bad {
		err := c.c.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: Validate() = %v, want ErrInvalid saying %q", c.name, err, c.why)
		}
	}
}

func TestDecisionZeroValue(t *testing.T) {
	var d Decision
	if d.Allowed || d.Source != Undecided || d.RetryAfter() != 0 {
		t.Errorf("zero Decision: %+v, RetryAfter %v; want undecided", d, d.RetryAfter())
	}
	if i, ok := d.Denier(); ok {
		t.Errorf("zero Decision: Denier() = %d, true; want no denier", i)
	}
}

func TestDecisionPrepare(t *testing.T) {
	d := Decision{Allowed: true, Shadowed: true, Source: FromFailOpen, Hits: []HitResult{{Used: 5}, {Used: 6}}}
	storage := &d.Hits[0]
	d.Prepare(2)
	if _, ok := d.Denier(); d.Allowed || ok || d.Shadowed || d.Source != Undecided || len(d.Hits) != 2 {
		t.Fatalf("after Prepare(2): %+v", d)
	}
	if &d.Hits[0] != storage || d.Hits[0] != (HitResult{}) || d.Hits[1] != (HitResult{}) {
		t.Errorf("Prepare did not clear and reuse the hit storage: %+v", d.Hits)
	}
	d.Prepare(3)
	if len(d.Hits) != 3 {
		t.Errorf("Prepare(3): %d hits", len(d.Hits))
	}
	if n := testing.AllocsPerRun(100, func() { d.Prepare(3) }); n != 0 {
		t.Errorf("Prepare within capacity allocates %v times", n)
	}
}

func TestDecisionConclude(t *testing.T) {
	for _, c := range []struct {
		name       string
		hits       []HitResult
		allowed    bool
		shadowed   bool
		denier     int // -1: none
		retryAfter time.Duration
	}{
		{"all allowed", []HitResult{{Allowed: true}, {Allowed: true}}, true, false, -1, 0},
		{"second denies", []HitResult{{Allowed: true}, {RetryAfter: 2 * time.Second}, {RetryAfter: time.Second}}, false, false, 1, 2 * time.Second},
		{"shadow cannot deny", []HitResult{{Allowed: true}, {Shadow: true, RetryAfter: time.Hour}}, true, true, -1, 0},
		{"shadow wait not counted", []HitResult{{Shadow: true, RetryAfter: time.Hour}, {RetryAfter: 5 * time.Second}}, false, true, 1, 5 * time.Second},
	} {
		var d Decision
		d.Prepare(len(c.hits))
		copy(d.Hits, c.hits)
		d.Conclude(FromStore)
		i, ok := d.Denier()
		if !ok {
			i = -1
		}
		if d.Allowed != c.allowed || d.Shadowed != c.shadowed || i != c.denier || d.Source != FromStore || d.RetryAfter() != c.retryAfter {
			t.Errorf("%s: Allowed %v Shadowed %v Denier %d RetryAfter %v; want %v %v %d %v",
				c.name, d.Allowed, d.Shadowed, i, d.RetryAfter(), c.allowed, c.shadowed, c.denier, c.retryAfter)
		}
	}
}

func TestDecisionDegrade(t *testing.T) {
	d := Decision{Hits: []HitResult{{Used: 1}}}
	d.Degrade(FromFailClosed, false, time.Second)
	if _, ok := d.Denier(); d.Allowed || ok || len(d.Hits) != 0 || d.RetryAfter() != time.Second {
		t.Errorf("fail-closed: %+v, RetryAfter %v; want denied, no denier, 1s", d, d.RetryAfter())
	}
	d.Degrade(FromFailOpen, true, time.Second)
	if !d.Allowed || d.RetryAfter() != 0 || d.Source != FromFailOpen {
		t.Errorf("fail-open: %+v, RetryAfter %v", d, d.RetryAfter())
	}
}

func TestSource(t *testing.T) {
	for s, want := range map[Source]struct {
		name     string
		degraded bool
	}{
		Undecided:      {"undecided", false},
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
