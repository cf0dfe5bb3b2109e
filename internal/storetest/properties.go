package storetest

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// traffic returns a seeded generator for an algorithm's random traffic,
// the same on every run and Go version.
func traffic(a sluice.Algorithm, seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(len(a))))
}

// testRetryAfter: for every denial in random traffic, the same check passes
// once the clock has advanced by RetryAfter and is still denied noticeably
// earlier: one microsecond for log and gcra, 1% of the wait for the
// estimators (whose waits are rounded floats).
func testRetryAfter(t *testing.T, f Factory) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		h := newHarness(t, f)
		l := limit(a, 5, 10*time.Second)
		rng := traffic(a, 1)
		denials := 0
		for range 150 {
			h.clock.Advance(time.Duration(rng.Int64N(1_500_000)) * time.Microsecond)
			c := one("k", l)
			c.Cost = 1 + rng.Int64N(3)
			d := h.check(c)
			if d.Allowed {
				continue
			}
			denials++
			wait, now := d.RetryAfter(), h.clock.Since()
			early := time.Microsecond
			if !exact(a) {
				early += (wait / 100).Truncate(time.Microsecond)
			}
			if early < wait {
				h.at(now + wait - early)
				if d := h.check(c); d.Allowed {
					t.Fatalf("at %v: denied with RetryAfter %v, but allowed %v earlier", now, wait, early)
				}
			}
			h.at(now + wait)
			if d := h.check(c); !d.Allowed {
				t.Fatalf("at %v: denied with RetryAfter %v, and still denied after it: %+v", now, wait, d.Hits[0])
			}
		}
		if denials < 10 {
			t.Fatalf("only %d denials: the traffic does not exercise the limit", denials)
		}
	})
}

// event is one admitted check.
type event struct {
	at   int64 // µs since the epoch
	cost int64
}

// testModel runs seeded random traffic and holds every decision to the
// algorithm's formula, recomputed here from the admitted events alone:
// Used must equal the model (to float rounding); an allowed check never
// leaves Used above Rate; the estimators stay within their documented error
// of the exact count; and log and gcra never admit more than their model
// allows in any interval.
func testModel(t *testing.T, f Factory) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		h := newHarness(t, f)
		l := limit(a, 10, 10*time.Second)
		rng := traffic(a, 2)
		var admitted []event
		for i := range 300 {
			h.clock.Advance(time.Duration(rng.Int64N(2_500_000)) * time.Microsecond)
			c := one("k", l)
			c.Cost = 1 + rng.Int64N(2)
			d := h.check(c)
			now := h.clock.Now().UnixMicro()
			if d.Allowed {
				admitted = append(admitted, event{now, c.Cost})
			}
			got := d.Hits[0].Used
			if want := modelUsed(l, admitted, now); math.Abs(got-want) > 1e-6*max(1, want) {
				t.Fatalf("check %d at %v: Used %v, the model says %v", i, h.clock.Since(), got, want)
			}
			if d.Allowed && got > float64(l.Rate)+1e-6 {
				t.Fatalf("check %d: allowed with Used %v above Rate %d", i, got, l.Rate)
			}
			if lo, hi := errorBound(l, admitted, now); got < lo-1e-6 || got > hi+1e-6 {
				t.Fatalf("check %d: Used %v outside [%v, %v] around the exact count %v",
					i, got, lo, hi, exactUsed(l, admitted, now))
			}
		}
		if len(admitted) < 50 || len(admitted) > 280 {
			t.Fatalf("%d of 300 admitted: the traffic does not exercise the limit", len(admitted))
		}
		checkAdmission(t, l, admitted)
	})
}

// sum returns the cost admitted in [from, to) µs.
func sum(events []event, from, to int64) int64 {
	var n int64
	for _, e := range events {
		if e.at >= from && e.at < to {
			n += e.cost
		}
	}
	return n
}

// exactUsed is the exact cost in the sliding window (now − W, now].
func exactUsed(l sluice.Limit, events []event, now int64) float64 {
	return float64(sum(events, now-l.Window.Microseconds()+1, now+1))
}

// modelUsed is DESIGN.md's formula for l's algorithm at now.
func modelUsed(l sluice.Limit, events []event, now int64) float64 {
	w := l.Window.Microseconds()
	switch l.Algo() {
	case sluice.SlidingWindow:
		start := floorDiv(now, w) * w
		prev, cur := sum(events, start-w, start), sum(events, start, now+1)
		return float64(prev)*float64(w-(now-start))/float64(w) + float64(cur)
	case sluice.Buckets:
		r := l.Bucket().Microseconds()
		start := floorDiv(now, r) * r
		oldest := sum(events, start-w, start-w+r)
		return float64(oldest)*float64(r-(now-start))/float64(r) + float64(sum(events, start-w+r, now+1))
	case sluice.Decay:
		var s float64
		var t0 int64
		at := func(now int64) float64 {
			v := s * math.Exp(-float64(now-t0)/float64(w))
			if v < 0.01 {
				return 0
			}
			return v
		}
		for _, e := range events {
			s, t0 = at(e.at)+float64(e.cost), e.at
		}
		return at(now)
	case sluice.GCRA:
		emission := float64(w) / float64(l.Rate)
		var tat float64
		for _, e := range events {
			tat = max(tat, float64(e.at)) + float64(e.cost)*emission
		}
		return max(0, tat-float64(now)) / emission
	}
	return exactUsed(l, events, now)
}

// errorBound is the documented range of Used around the exact count:
// exact for log; within the previous window's count for sliding-window and
// within the oldest bucket's count for buckets (the part of it assumed
// spread evenly); at most the exact count for gcra (what is still "in
// flight" was admitted in the window). Decay is a different model of rate:
// only its formula is checked.
func errorBound(l sluice.Limit, events []event, now int64) (lo, hi float64) {
	exact := exactUsed(l, events, now)
	w := l.Window.Microseconds()
	switch l.Algo() {
	case sluice.Log:
		return exact, exact
	case sluice.SlidingWindow, sluice.Buckets:
		r := l.Bucket().Microseconds()
		start := floorDiv(now, r) * r
		partial := float64(sum(events, start-w, start-w+r))
		return exact - partial, exact + partial
	case sluice.GCRA:
		return 0, exact
	}
	return 0, math.Inf(1)
}

// checkAdmission: log admits at most Rate in any window (t − W, t]; gcra at
// most Rate + (t_b − t_a)/T in any interval [t_a, t_b], its burst plus one
// unit per emission interval T = W/Rate.
func checkAdmission(t *testing.T, l sluice.Limit, events []event) {
	t.Helper()
	w := l.Window.Microseconds()
	for b, eb := range events {
		var units int64
		for a := b; a >= 0; a-- {
			ea := events[a]
			units += ea.cost
			switch l.Algo() {
			case sluice.Log:
				if ea.at > eb.at-w && units > l.Rate {
					t.Fatalf("log admitted %d in (%d − W, %d], more than %d", units, eb.at, eb.at, l.Rate)
				}
			case sluice.GCRA:
				bound := float64(l.Rate) + float64(eb.at-ea.at)*float64(l.Rate)/float64(w)
				if float64(units) > bound+1e-9 {
					t.Fatalf("gcra admitted %d in [%d, %d], more than %v", units, ea.at, eb.at, bound)
				}
			}
		}
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
