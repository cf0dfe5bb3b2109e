package algo

import "math"

// Params are one limit's parameters in microseconds.
type Params struct {
	Rate   int64 // cost allowed per Window, > 0
	Window int64 // µs, > 0
	Bucket int64 // µs; the bucket length of Buckets, divides Window
}

// Result is one hit's answer to Eval.
type Result struct {
	Allowed    bool    // cost fits under the limit now
	Used       float64 // usage at now, before cost
	RetryAfter int64   // µs until the same cost would fit; 0 when Allowed
	ResetAfter int64   // µs until the usage is zero
}

// State is the state of one (key, limit). Implementations are not safe for
// concurrent use: the store serialises access to one state.
type State interface {
	// Eval reports whether cost fits at now, without changing the state.
	Eval(p Params, now, cost int64) Result
	// Record adds cost at now and returns the usage after it and the µs
	// until the usage is zero again.
	Record(p Params, now, cost int64) (used float64, resetAfter int64)
}

// Hit is one state under its limit in a decision.
type Hit struct {
	State  State
	Params Params
	Shadow bool // evaluated and recorded, never denies
}

// Outcome is one hit's part of a decision.
type Outcome struct {
	Allowed    bool    // this hit alone lets the cost pass
	Used       float64 // after recording when the check was allowed, before otherwise
	RetryAfter int64   // µs; 0 when Allowed
	ResetAfter int64   // µs until the usage is zero
}

// Decide is the contract of a check, in one place: it evaluates every hit at
// now and, if every non-shadow hit fits, records cost on every hit (shadow
// ones included). Otherwise nothing is recorded. cost 0 records nothing.
// out must have len(hits) elements. denier is the index of the first
// non-shadow hit that does not fit, or -1; shadowed reports that a shadow
// hit did not fit.
func Decide(hits []Hit, out []Outcome, now, cost int64) (allowed bool, denier int, shadowed bool) {
	allowed, denier = true, -1
	for i, h := range hits {
		r := h.State.Eval(h.Params, now, cost)
		out[i] = Outcome{Allowed: r.Allowed, Used: r.Used, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
		switch {
		case r.Allowed:
		case h.Shadow:
			shadowed = true
		case allowed:
			allowed, denier = false, i
		}
	}
	if !allowed || cost == 0 {
		return allowed, denier, shadowed
	}
	for i, h := range hits {
		out[i].Used, out[i].ResetAfter = h.State.Record(h.Params, now, cost)
	}
	return allowed, denier, shadowed
}

// fits reports whether cost fits on top of used under rate, with the slack
// described in the package doc.
func fits(used float64, cost, rate int64) bool {
	return used+float64(cost) <= float64(rate)+1e-9+1e-12*float64(rate)
}

// Remaining returns floor(rate - used), at least 0, forgiving the same
// rounding slack as fits.
func Remaining(rate int64, used float64) int64 {
	r := math.Floor(float64(rate) - used + 1e-9 + 1e-12*float64(rate))
	if r < 0 {
		return 0
	}
	return int64(r)
}

// ceilMicros rounds a wait in µs up to a whole microsecond, at least 0.
func ceilMicros(t float64) int64 {
	if t <= 0 {
		return 0
	}
	return int64(math.Ceil(t))
}

// check is Decide for one hit on any state: Eval, then Record when the hit
// is allowed (or shadow) and cost > 0. The states' Check methods are this,
// fused.
func check(s State, p Params, now, cost int64, shadow bool) Outcome {
	r := s.Eval(p, now, cost)
	o := Outcome{Allowed: r.Allowed, Used: r.Used, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
	if (r.Allowed || shadow) && cost > 0 {
		o.Used, o.ResetAfter = s.Record(p, now, cost)
	}
	return o
}
