package storetest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ident"
)

// Factory returns a fresh, empty limiter that reads time from now. It is
// called once per subtest; it may register cleanups on t.
type Factory func(t *testing.T, now func() time.Time) sluice.Limiter

// Run runs the conformance suite against the limiters newLimiter makes.
func Run(t *testing.T, newLimiter Factory) {
	t.Run("TenPerMinute", func(t *testing.T) { testTenPerMinute(t, newLimiter) })
	t.Run("Cloudflare", func(t *testing.T) { testCloudflare(t, newLimiter) })
	t.Run("SeveralLimitsOneKey", func(t *testing.T) { testSeveralLimitsOneKey(t, newLimiter) })
	t.Run("SharedResource", func(t *testing.T) { testSharedResource(t, newLimiter) })
	t.Run("Peek", func(t *testing.T) { testPeek(t, newLimiter) })
	t.Run("InvalidInput", func(t *testing.T) { testInvalidInput(t, newLimiter) })
	t.Run("CanceledContext", func(t *testing.T) { testCanceledContext(t, newLimiter) })
	t.Run("Reset", func(t *testing.T) { testReset(t, newLimiter) })
	t.Run("DeniedRecordsNothing", func(t *testing.T) { testDeniedRecordsNothing(t, newLimiter) })
	t.Run("Shadow", func(t *testing.T) { testShadow(t, newLimiter) })
	t.Run("SharedIdentity", func(t *testing.T) { testSharedIdentity(t, newLimiter) })
	t.Run("RetryAfter", func(t *testing.T) { testRetryAfter(t, newLimiter) })
	t.Run("Model", func(t *testing.T) { testModel(t, newLimiter) })
	t.Run("Isolation", func(t *testing.T) { testIsolation(t, newLimiter) })
	t.Run("GroupIdentity", func(t *testing.T) { testGroupIdentity(t, newLimiter) })
	t.Run("FreshExact", func(t *testing.T) { testFreshExact(t, newLimiter) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, newLimiter) })
}

// harness is one subtest's limiter on a fake clock.
type harness struct {
	t     *testing.T
	clock *Clock
	lim   sluice.Limiter
	d     sluice.Decision
}

func newHarness(t *testing.T, f Factory) *harness {
	t.Helper()
	h := &harness{t: t, clock: new(Clock)}
	h.lim = f(t, h.clock.Now)
	return h
}

// at sets the clock to Start + d.
func (h *harness) at(d time.Duration) { h.clock.Set(Start().Add(d)) }

// check runs c and fails the test on an error or a malformed decision. The
// returned decision is valid until the next check.
func (h *harness) check(c sluice.Check) *sluice.Decision {
	h.t.Helper()
	if err := h.lim.Check(context.Background(), c, &h.d); err != nil {
		h.t.Fatalf("at %v: Check(%s): %v", h.clock.Since(), describe(c), err)
	}
	checkShape(h.t, c, &h.d)
	return &h.d
}

// peek returns hit i's result of a zero-cost check of c.
func (h *harness) peek(c sluice.Check, i int) sluice.HitResult {
	h.t.Helper()
	c.Cost = 0
	return h.check(c).Hits[i]
}

func (h *harness) reset(c sluice.Check) {
	h.t.Helper()
	if err := h.lim.Reset(context.Background(), c); err != nil {
		h.t.Fatalf("Reset(%s): %v", describe(c), err)
	}
}

// checkShape holds every decision to the invariants of sluice.Decision.
func checkShape(t *testing.T, c sluice.Check, d *sluice.Decision) {
	t.Helper()
	if d.Source != sluice.FromStore {
		t.Fatalf("Source = %v, want %v", d.Source, sluice.FromStore)
	}
	if len(d.Hits) != len(c.Hits) {
		t.Fatalf("%d hit results for %d hits", len(d.Hits), len(c.Hits))
	}
	if d.Allowed != (DenierOf(d) == -1) {
		t.Fatalf("Allowed = %v with Denier = %d", d.Allowed, DenierOf(d))
	}
	shadowed := false
	for i, r := range d.Hits {
		shadow := c.Shadow || c.Hits[i].Limit.Shadow
		if r.Shadow != shadow {
			t.Fatalf("hit %d: Shadow = %v, want %v", i, r.Shadow, shadow)
		}
		if r.Allowed != (r.RetryAfter == 0) || r.Remaining < 0 || r.ResetAfter < 0 || r.Used < 0 {
			t.Fatalf("hit %d: inconsistent result %+v", i, r)
		}
		shadowed = shadowed || (shadow && !r.Allowed)
		if !shadow && !r.Allowed && d.Allowed {
			t.Fatalf("hit %d denies but the check was allowed: %+v", i, d)
		}
	}
	if DenierOf(d) >= 0 && (d.Hits[DenierOf(d)].Allowed || d.Hits[DenierOf(d)].Shadow) {
		t.Fatalf("Denier %d did not deny: %+v", DenierOf(d), d.Hits[DenierOf(d)])
	}
	if d.Shadowed != shadowed {
		t.Fatalf("Shadowed = %v, want %v", d.Shadowed, shadowed)
	}
}

// describe names a check's hits and cost for failure messages.
func describe(c sluice.Check) string {
	var b strings.Builder
	for i, h := range c.Hits {
		if i > 0 {
			b.WriteString(", ")
		}
		key := h.Key
		if len(key) > 40 {
			key = key[:40] + "…"
		}
		fmt.Fprintf(&b, "%q/%q %s %s", h.Zone, key, h.Limit.String(), h.Limit.Algo())
	}
	fmt.Fprintf(&b, " cost %d", c.Cost)
	return b.String()
}

// limit returns rate per window under algorithm a; a Buckets limit gets
// ten buckets per window.
func limit(a sluice.Algorithm, rate int64, window time.Duration) sluice.Limit {
	l := sluice.Limit{Rate: rate, Window: window, Algorithm: a}
	if e, _ := ident.Lookup(string(a)); e.Bucketed {
		l.Resolution = window / 10
	}
	return l
}

// one returns a unit-cost check of one hit.
func one(key string, l sluice.Limit) sluice.Check {
	return sluice.Check{Hits: []sluice.Hit{{Key: key, Limit: l}}, Cost: 1}
}

// forEachAlgorithm runs f in a subtest per algorithm of internal/ident's
// table.
func forEachAlgorithm(t *testing.T, f func(t *testing.T, a sluice.Algorithm)) {
	for _, a := range ident.Algos() {
		t.Run(a.Name, func(t *testing.T) { f(t, sluice.Algorithm(a.Name)) })
	}
}

// exact reports whether a decides on integers (ident.Algo.Exact): its
// waits are exact, not rounded floats.
func exact(a sluice.Algorithm) bool {
	e, _ := ident.Lookup(string(a))
	return e.Exact
}

// same compares usages to float rounding (the estimators' weights).
func same(got, want float64) bool {
	return math.Abs(got-want) <= 1e-6*max(1, math.Abs(want))
}

// DenierOf returns the index of the denying hit of d (a sluice.Decision or
// a pointer to one), or -1 when there is none: Decision.Denier as one
// comparable int, for tests.
func DenierOf(d any) int {
	var dd *sluice.Decision
	switch d := d.(type) {
	case sluice.Decision:
		dd = &d
	case *sluice.Decision:
		dd = d
	}
	if i, ok := dd.Denier(); ok {
		return i
	}
	return -1
}
