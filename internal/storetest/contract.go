package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ident"
)

// testPeek: cost 0 reports the state and records nothing, on a fresh key
// and on a used one, even when the limit is exhausted.
func testPeek(t *testing.T, f Factory) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		h := newHarness(t, f)
		l := limit(a, 10, time.Minute)
		c := one("k", l)
		if r := h.peek(c, 0); !h.d.Allowed || !same(r.Used, 0) || r.Remaining != 10 || r.ResetAfter != 0 {
			t.Fatalf("peek on a fresh key: %+v, want allowed, used 0, remaining 10, reset 0", r)
		}
		for range 3 {
			h.check(c)
		}
		for range 3 {
			if r := h.peek(c, 0); !same(r.Used, 3) || r.Remaining != 7 {
				t.Fatalf("peek after 3: %+v, want used 3, remaining 7", r)
			}
		}
		c.Cost = 7
		h.check(c)
		if r := h.peek(c, 0); !h.d.Allowed || !same(r.Used, 10) || r.Remaining != 0 {
			t.Fatalf("peek on a full limit: %+v, want allowed (cost 0 fits), used 10, remaining 0", r)
		}
		if d := h.check(one("k", l)); d.Allowed {
			t.Fatalf("check after 10: allowed, want denied (the peeks recorded something?)")
		}
	})
}

// testInvalidInput: malformed checks are errors wrapping sluice.ErrInvalid,
// and record nothing.
func testInvalidInput(t *testing.T, f Factory) {
	h := newHarness(t, f)
	l := limit(sluice.SlidingWindow, 10, time.Minute)
	ok := sluice.Hit{Key: "k", Limit: l}
	cases := map[string]sluice.Check{
		"cost above the rate": {Hits: []sluice.Hit{ok}, Cost: 11},
		"cost above one hit's rate": {Hits: []sluice.Hit{ok,
			{Key: "k2", Limit: limit(sluice.Log, 5, time.Second)}}, Cost: 6},
		"negative cost": {Hits: []sluice.Hit{ok}, Cost: -1},
		"no hits":       {Cost: 1},
		"empty key":     {Hits: []sluice.Hit{{Limit: l}}, Cost: 1},
		"zero rate":     {Hits: []sluice.Hit{{Key: "k", Limit: sluice.Limit{Window: time.Minute}}}, Cost: 1},
		"zero window":   {Hits: []sluice.Hit{{Key: "k", Limit: sluice.Limit{Rate: 1}}}, Cost: 1},
		"shared state":  {Hits: []sluice.Hit{ok, ok}, Cost: 1},
	}
	for name, c := range cases {
		err := h.lim.Check(context.Background(), c, &h.d)
		if !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("%s: Check error %v, want ErrInvalid", name, err)
		}
	}
	if r := h.peek(sluice.Check{Hits: []sluice.Hit{ok}}, 0); !same(r.Used, 0) {
		t.Errorf("after invalid checks, used %v, want 0", r.Used)
	}
	if err := h.lim.Reset(context.Background(), sluice.Check{}); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("Reset with no hits: %v, want ErrInvalid", err)
	}
}

// testReset: Reset forgets the named hits' state, and only theirs.
func testReset(t *testing.T, f Factory) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		h := newHarness(t, f)
		l := limit(a, 10, time.Minute)
		hour := limit(a, 10, time.Hour)
		for _, k := range []string{"a", "b"} {
			c := sluice.Check{Hits: []sluice.Hit{{Key: k, Limit: l}, {Key: k, Limit: hour}}, Cost: 10}
			h.check(c)
		}
		h.reset(sluice.Check{Hits: []sluice.Hit{{Key: "a", Limit: l}}, Cost: 5})
		if d := h.check(one("a", l)); !d.Allowed || d.Hits[0].Remaining != 9 {
			t.Fatalf("after Reset: %+v, want allowed with 9 remaining", d)
		}
		if r := h.peek(one("a", hour), 0); !same(r.Used, 10) {
			t.Errorf("Reset of the minute limit changed the hour limit: used %v, want 10", r.Used)
		}
		if d := h.check(one("b", l)); d.Allowed {
			t.Errorf("Reset of key a allowed key b")
		}
		h.reset(sluice.Check{Hits: []sluice.Hit{{Key: "b", Limit: l}, {Key: "b", Limit: hour}}})
		for _, lim := range []sluice.Limit{l, hour} {
			if r := h.peek(one("b", lim), 0); !same(r.Used, 0) {
				t.Errorf("after Reset of both, %s used %v, want 0", lim, r.Used)
			}
		}
		h.reset(one("never-seen", l))
	})
}

// testDeniedRecordsNothing: a client hammering a denied check is held to
// the same state as one that waits, and a check denied by one hit spends
// nothing on the others.
func testDeniedRecordsNothing(t *testing.T, f Factory) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		h := newHarness(t, f)
		l := limit(a, 3, time.Minute)
		for _, k := range []string{"quiet", "hammer"} {
			c := one(k, l)
			c.Cost = 3
			h.check(c)
		}
		for i := range 20 {
			h.at(time.Duration(i) * 500 * time.Millisecond)
			if d := h.check(one("hammer", l)); d.Allowed {
				t.Fatalf("hammer check %d allowed", i)
			}
		}
		quiet := h.peek(one("quiet", l), 0)
		hammer := h.peek(one("hammer", l), 0)
		if !same(quiet.Used, hammer.Used) || quiet.ResetAfter != hammer.ResetAfter {
			t.Fatalf("hammered state %+v differs from the quiet one %+v", hammer, quiet)
		}
		wait := h.check(one("quiet", l)).RetryAfter()
		h.clock.Advance(wait)
		if d := h.check(one("hammer", l)); !d.Allowed {
			t.Fatalf("after the quiet key's RetryAfter %v the hammered key is still denied", wait)
		}

		multi := sluice.Check{Hits: []sluice.Hit{{Key: "m", Limit: limit(a, 10, time.Minute)},
			{Key: "m", Limit: limit(a, 1, time.Hour)}}, Cost: 1}
		h.check(multi)
		for range 5 {
			if d := h.check(multi); d.Allowed || DenierOf(d) != 1 {
				t.Fatalf("multi-hit check: %+v, want denied by hit 1", d)
			}
		}
		if r := h.peek(multi, 0); !same(r.Used, 1) {
			t.Errorf("hit 0 used %v after denied checks, want 1", r.Used)
		}
	})
}

// testShadow: shadow hits record as if allowed and never deny; the decision
// reports what they would have done.
func testShadow(t *testing.T, f Factory) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		h := newHarness(t, f)
		shadow := limit(a, 2, 10*time.Second)
		shadow.Shadow = true
		c := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: shadow}, {Key: "k", Limit: limit(a, 10, time.Minute)}}, Cost: 1}
		for i := range 5 {
			d := h.check(c)
			if !d.Allowed || d.Shadowed != (i >= 2) {
				t.Fatalf("check %d: %+v, want allowed, shadowed from the third", i, d)
			}
			if i >= 2 && (d.Hits[0].RetryAfter <= 0 || d.Hits[0].Remaining != 0) {
				t.Fatalf("check %d: shadow result %+v, want a RetryAfter and nothing remaining", i, d.Hits[0])
			}
		}
		if r := h.peek(c, 0); !same(r.Used, 5) {
			t.Errorf("shadow hit used %v, want 5 (recorded as if allowed)", r.Used)
		}

		all := one("s", limit(a, 1, time.Minute))
		all.Shadow = true
		for i := range 3 {
			if d := h.check(all); !d.Allowed || d.Shadowed != (i >= 1) || !d.Hits[0].Shadow {
				t.Fatalf("Check.Shadow check %d: %+v", i, d)
			}
		}
		if d := h.check(one("s", limit(a, 1, time.Minute))); d.Allowed || !same(d.Hits[0].Used, 3) {
			t.Errorf("enforced check after 3 shadow ones: %+v, want denied with 3 used", d)
		}
	})
}

// testSharedIdentity holds a store to internal/ident's State, for every
// algorithm of its table: hits whose zone, key, group, algorithm, window
// and bucket length are equal share state whatever their Name and Shadow
// flag (and, shown for the default algorithm, their Rate); a difference in
// any one of the six separates them.
func testSharedIdentity(t *testing.T, f Factory) {
	for _, a := range ident.Algos() {
		t.Run(a.Name, func(t *testing.T) {
			h := newHarness(t, f)
			base := limit(sluice.Algorithm(a.Name), 10, time.Minute)
			c := one("k", base)
			c.Group, c.Cost = "g", 10
			h.check(c)
			renamed := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: base}}, Group: "g"}
			renamed.Hits[0].Limit.Name, renamed.Hits[0].Limit.Shadow = "renamed", true
			if r := h.peek(renamed, 0); !same(r.Used, 10) {
				t.Errorf("a renamed shadow limit: used %v, want 10 (shared state)", r.Used)
			}
			if a.Name == string(sluice.SlidingWindow) {
				// Raising a limit keeps the usage counted so far.
				raised := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: base}}, Group: "g", Cost: 1}
				raised.Hits[0].Limit.Rate = 20
				if d := h.check(raised); !d.Allowed || !same(d.Hits[0].Used, 11) {
					t.Errorf("raised limit: %+v, want allowed with 11 used (shared state)", d)
				}
			}
			others := map[string]sluice.Check{
				"zone":      {Hits: []sluice.Hit{{Zone: "z", Key: "k", Limit: base}}, Group: "g"},
				"key":       {Hits: []sluice.Hit{{Key: "k2", Limit: base}}, Group: "g"},
				"group":     {Hits: []sluice.Hit{{Key: "k", Limit: base}}},
				"window":    {Hits: []sluice.Hit{{Key: "k", Limit: limit(sluice.Algorithm(a.Name), 10, time.Hour)}}, Group: "g"},
				"algorithm": {Hits: []sluice.Hit{{Key: "k", Limit: limit(otherAlgorithm(a), 10, time.Minute)}}, Group: "g"},
			}
			if a.Bucketed {
				coarse := base
				coarse.Resolution = 30 * time.Second
				others["bucket"] = sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: coarse}}, Group: "g"}
			}
			for name, c := range others {
				if r := h.peek(c, 0); !same(r.Used, 0) {
					t.Errorf("a hit with another %s shares state: used %v", name, r.Used)
				}
			}
		})
	}
}

// otherAlgorithm returns an algorithm of the table other than a.
func otherAlgorithm(a ident.Algo) sluice.Algorithm {
	for _, o := range ident.Algos() {
		if o.Code != a.Code {
			return sluice.Algorithm(o.Name)
		}
	}
	panic("storetest: the table has one algorithm")
}

// testCanceledContext: a check or reset whose context is already done
// returns an error wrapping the context's, and changes nothing.
func testCanceledContext(t *testing.T, f Factory) {
	h := newHarness(t, f)
	c := one("k", limit(sluice.SlidingWindow, 10, time.Minute))
	h.check(c)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.lim.Check(ctx, c, &h.d); !errors.Is(err, context.Canceled) {
		t.Errorf("Check with a canceled context: %v, want context.Canceled", err)
	}
	if err := h.lim.Reset(ctx, c); !errors.Is(err, context.Canceled) {
		t.Errorf("Reset with a canceled context: %v, want context.Canceled", err)
	}
	if r := h.peek(c, 0); !same(r.Used, 1) {
		t.Errorf("after canceled calls, used %v, want 1", r.Used)
	}
}
