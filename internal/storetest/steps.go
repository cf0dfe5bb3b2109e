package storetest

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// step is one check in a single-hit step table.
type step struct {
	at        time.Duration // clock reading, since Start()
	cost      int64
	allowed   bool
	remaining int64
	retry     time.Duration // want RetryAfter (0 when allowed)
	reset     time.Duration // want ResetAfter, when non-zero
}

// runSteps runs steps on key "k" under l, on a fresh limiter.
func runSteps(t *testing.T, f Factory, l sluice.Limit, steps []step) {
	t.Helper()
	h := newHarness(t, f)
	for i, s := range steps {
		h.at(s.at)
		c := one("k", l)
		c.Cost = s.cost
		r := h.check(c).Hits[0]
		if h.d.Allowed != s.allowed || r.Remaining != s.remaining || !near(r.RetryAfter, s.retry, l) ||
			s.reset != 0 && !near(r.ResetAfter, s.reset, l) {
			t.Errorf("step %d (at %v, cost %d): got allowed %v, remaining %d, retry %v, reset %v; want %v, %d, %v, reset %v",
				i, s.at, s.cost, h.d.Allowed, r.Remaining, r.RetryAfter, r.ResetAfter, s.allowed, s.remaining, s.retry, s.reset)
		}
	}
}

// near compares durations exactly for the exact algorithms and to the
// microsecond for the others, whose waits are rounded floats.
func near(got, want time.Duration, l sluice.Limit) bool {
	if exact(l.Algo()) {
		return got == want
	}
	return got >= want-time.Microsecond && got <= want+time.Microsecond
}

// micros rounds seconds up to a whole microsecond, as the algorithms do.
func micros(seconds float64) time.Duration {
	return time.Duration(math.Ceil(seconds*1e6)) * time.Microsecond
}

// testTenPerMinute: a fresh 10r/m admits exactly 10 unit checks at t = 0;
// the 11th is denied with the RetryAfter of DESIGN.md, which is exact.
func testTenPerMinute(t *testing.T, f Factory) {
	want := map[sluice.Algorithm]struct {
		retry, reset time.Duration
		remaining    int64 // after the check at RetryAfter
	}{
		sluice.Log:           {60 * time.Second, 60 * time.Second, 9},
		sluice.SlidingWindow: {66 * time.Second, 120 * time.Second, 0},
		sluice.Buckets:       {61 * time.Second, 70 * time.Second, 0},
		sluice.Decay:         {micros(60 * math.Log(10.0/9.0)), micros(60 * math.Log(10/0.01)), 0},
		sluice.GCRA:          {6 * time.Second, 60 * time.Second, 0},
	}
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		w := want[a]
		var steps []step
		for i := range int64(10) {
			steps = append(steps, step{cost: 1, allowed: true, remaining: 9 - i})
		}
		steps[9].reset = w.reset
		early := time.Millisecond
		if exact(a) {
			early = time.Microsecond
		}
		steps = append(steps,
			step{cost: 1, remaining: 0, retry: w.retry},
			step{at: w.retry - early, cost: 1, remaining: 0, retry: early},
			step{at: w.retry, cost: 1, allowed: true, remaining: w.remaining},
		)
		l := limit(a, 10, time.Minute)
		if a == sluice.Buckets {
			l.Resolution = 10 * time.Second // DESIGN.md's example
		}
		runSteps(t, f, l, steps)
	})
}

// testCloudflare is Cloudflare's example: 50r/m, 42 in the previous window,
// 18 in the current one, 15 s in: Used = 42·45/60 + 18 = 49.5, and a check
// waits until 42·(45 − t)/60 + 19 ≤ 50.
func testCloudflare(t *testing.T, f Factory) {
	l := limit(sluice.SlidingWindow, 50, time.Minute)
	retry := micros(45 - 31*60/42.0)
	runSteps(t, f, l, []step{
		{at: 0, cost: 42, allowed: true, remaining: 8},
		{at: 75 * time.Second, cost: 18, allowed: true, remaining: 0},
		{at: 75 * time.Second, cost: 1, remaining: 0, retry: retry},
		{at: 75*time.Second + retry - time.Millisecond, cost: 1, remaining: 0, retry: time.Millisecond},
		{at: 75*time.Second + retry, cost: 1, allowed: true, remaining: 0},
	})
	h := newHarness(t, f)
	h.check(sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: l}}, Cost: 42})
	h.at(75 * time.Second)
	h.check(sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: l}}, Cost: 18})
	if got := h.d.Hits[0].Used; math.Abs(got-49.5) > 1e-9 {
		t.Errorf("Used = %v, want 49.5", got)
	}
}

// testSeveralLimitsOneKey is seed o1.rate-limiter's example: "1r/5s, 5r/h"
// on one key. With log, checks at 0, 5, 10, 15 and 20 s pass; at 25 s the
// hourly limit denies and nothing is recorded on the 5 s limit, so at 26 s
// the hourly limit alone denies again. With sliding-window the check at 5 s
// is already denied by the 5 s limit.
func testSeveralLimitsOneKey(t *testing.T, f Factory) {
	limits, err := sluice.ParseLimits("1r/5s, 5r/h")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("log", func(t *testing.T) {
		h := newHarness(t, f)
		c := sluice.Check{Cost: 1}
		for _, l := range limits {
			l.Algorithm = sluice.Log
			c.Hits = append(c.Hits, sluice.Hit{Key: "k", Limit: l})
		}
		for _, at := range []int{0, 5, 10, 15, 20} {
			h.at(time.Duration(at) * time.Second)
			if d := h.check(c); !d.Allowed {
				t.Fatalf("at %d s: denied %+v", at, d)
			}
		}
		for _, at := range []int{25, 26} {
			h.at(time.Duration(at) * time.Second)
			d := h.check(c)
			if d.Allowed || DenierOf(d) != 1 || !d.Hits[0].Allowed {
				t.Fatalf("at %d s: got %+v, want denied by the hourly limit only", at, d)
			}
			if want := time.Hour - time.Duration(at)*time.Second; d.RetryAfter() != want {
				t.Errorf("at %d s: RetryAfter %v, want %v", at, d.RetryAfter(), want)
			}
		}
	})
	t.Run("sliding-window", func(t *testing.T) {
		h := newHarness(t, f)
		c := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: limits[0]}, {Key: "k", Limit: limits[1]}}, Cost: 1}
		h.check(c)
		h.at(5 * time.Second)
		if d := h.check(c); d.Allowed || DenierOf(d) != 0 || d.RetryAfter() != 5*time.Second {
			t.Fatalf("at 5 s: got %+v, want denied by the 5 s limit for 5 s", d)
		}
	})
}

// testSharedResource is seed LUA_rateLimiting's example: a resource allows
// 5 per 10 s, each consumer 3 per 10 s, all checks at t = 0 in one group.
// A, A, A pass; A is denied by its own limit and the resource stays at 3;
// B, B pass; B is denied by the resource and B's count stays 2.
func testSharedResource(t *testing.T, f Factory) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		h := newHarness(t, f)
		check := func(consumer string) sluice.Check {
			return sluice.Check{Group: "printer", Cost: 1, Hits: []sluice.Hit{
				{Zone: "resource", Key: "printer", Limit: limit(a, 5, 10*time.Second)},
				{Zone: "consumer", Key: consumer, Limit: limit(a, 3, 10*time.Second)},
			}}
		}
		steps := []struct {
			consumer string
			denier   int
		}{{"A", -1}, {"A", -1}, {"A", -1}, {"A", 1}, {"B", -1}, {"B", -1}, {"B", 0}}
		for i, s := range steps {
			if d := h.check(check(s.consumer)); DenierOf(d) != s.denier {
				t.Fatalf("check %d (%s): Denier %d, want %d: %+v", i, s.consumer, DenierOf(d), s.denier, d)
			}
			if i == 3 {
				if got := h.peek(check("A"), 0).Used; !same(got, 3) {
					t.Fatalf("after A's denial the resource used %v, want 3", got)
				}
			}
		}
		if got := h.peek(check("B"), 0).Used; !same(got, 5) {
			t.Errorf("resource used %v, want 5", got)
		}
		if got := h.peek(check("B"), 1).Used; !same(got, 2) {
			t.Errorf("B used %v, want 2", got)
		}
	})
}
