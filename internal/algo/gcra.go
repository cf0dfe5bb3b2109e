package algo

import "math/bits"

// GCRA is the generic cell rate algorithm's state: the theoretical arrival
// time TAT, held exactly as TAT + Frac/Rate µs, so that the emission
// interval T = W/Rate µs (rarely a whole number) adds up without rounding:
// after k unit records from now, TAT is now + k·W/Rate exactly. With a
// burst of Rate, a cost c fits when max(TAT, now) + c·T − now ≤ W;
// recording sets TAT = max(TAT, now) + c·T. Used is (TAT − now)/T, the cost
// still "in flight".
type GCRA struct {
	TAT  int64 // whole µs since the epoch; 0 when fresh
	Frac int64 // the fraction of a µs past TAT, in units of 1/Rate µs: 0 <= Frac < Rate
}

// start returns max(TAT, now) as whole µs and a fraction in 1/Rate µs. A
// Frac left by a larger rate is clamped to below Rate.
func (s *GCRA) start(p Params, now int64) (q, r int64) {
	if s.TAT < now {
		return now, 0
	}
	return s.TAT, min(s.Frac, p.Rate-1)
}

// advance returns (q, r) + cost·W/Rate µs, exactly. cost <= Rate, so
// cost·(W mod Rate) < Rate², which MulDiv divides without overflow.
func advance(p Params, q, r, cost int64) (int64, int64) {
	dq, dr := MulDiv(cost, p.Window%p.Rate, p.Rate)
	q, r = q+cost*(p.Window/p.Rate)+dq, r+dr
	if r >= p.Rate {
		q, r = q+1, r-p.Rate
	}
	return q, r
}

// MulDiv returns a·b / m and a·b mod m for 0 <= a, b and 0 < m, with
// a·b < 2^64·m, without overflow. The Lua scripts compute the same
// integers (muldiv in gcra.lua).
func MulDiv(a, b, m int64) (quo, rem int64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, rm := bits.Div64(hi, lo, uint64(m))
	return int64(q), int64(rm)
}

// gcraUsed is (q + r/Rate − now)/T = ((q − now)·Rate + r)/W.
func gcraUsed(p Params, q, r, now int64) float64 {
	return (float64(q-now)*float64(p.Rate) + float64(r)) / float64(p.Window)
}

// gcraWait is the µs from now until q + r/Rate, rounded up, at least 0.
func gcraWait(q, r, now int64) int64 {
	if r > 0 {
		q++
	}
	return max(0, q-now)
}

// Eval implements State. The decision compares integers: it is exact for
// every Rate up to sluice.MaxRate, and waiting exactly RetryAfter passes.
func (s *GCRA) Eval(p Params, now, cost int64) Result {
	q, r := s.start(p, now)
	res := Result{Used: gcraUsed(p, q, r, now), ResetAfter: gcraWait(q, r, now)}
	q1, r1 := advance(p, q, r, cost)
	end := now + p.Window
	if res.Allowed = q1 < end || q1 == end && r1 == 0; !res.Allowed {
		res.RetryAfter = gcraWait(q1, r1, end)
	}
	return res
}

// Record implements State.
func (s *GCRA) Record(p Params, now, cost int64) (float64, int64) {
	q, r := s.start(p, now)
	s.TAT, s.Frac = advance(p, q, r, cost)
	return gcraUsed(p, s.TAT, s.Frac, now), gcraWait(s.TAT, s.Frac, now)
}

// Check is Decide for one hit on s: Eval, then Record when the hit is
// allowed (or shadow) and cost > 0.
// (check, written out on the concrete type so that s does not escape.)
func (s *GCRA) Check(p Params, now, cost int64, shadow bool) Outcome {
	r := s.Eval(p, now, cost)
	o := Outcome{Allowed: r.Allowed, Used: r.Used, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
	if (r.Allowed || shadow) && cost > 0 {
		o.Used, o.ResetAfter = s.Record(p, now, cost)
	}
	return o
}
