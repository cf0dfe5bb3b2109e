package algo

import (
	"math"
	mrand "math/rand/v2"
	"testing"
)

// refDecay is Decay as it was before lnApprox and the fused waits
// (commit e326886): ln S from math.Log, Eval through at, wait and
// waitLn. TestDecayIsRefDecay holds the current Decay to it.
type refDecay struct {
	S, lnS float64
	T0     int64
}

func (s *refDecay) setS(v float64) {
	s.S, s.lnS = v, 0
	if v > 0 {
		s.lnS = math.Log(v)
	}
}

func (s *refDecay) at(p Params, now int64) float64 {
	v := s.S
	if now > s.T0 {
		v *= math.Exp(-float64(now-s.T0) / float64(p.Window))
	}
	if v < DecayZero {
		return 0
	}
	return v
}

func (s *refDecay) wait(p Params, now int64, v, to, lnTo float64) int64 {
	if v <= to {
		return 0
	}
	if t, ok := s.waitLn(p, now, lnTo); ok {
		return t
	}
	return decayWait(p, v, to)
}

func (s *refDecay) waitLn(p Params, now int64, lnTo float64) (t int64, ok bool) {
	if s.lnS == 0 {
		return 0, false
	}
	dt := 0.0
	if now > s.T0 {
		dt = float64(now - s.T0)
	}
	w := float64(p.Window)
	x := w*(s.lnS-lnTo) - dt
	d := (w*(math.Abs(s.lnS)+math.Abs(lnTo)+1) + dt + math.Abs(x)) * waitMargin
	if lo := x - d; lo > 0 {
		if c := math.Ceil(lo); c == math.Ceil(x+d) {
			return int64(c), true
		}
	}
	return 0, false
}

func (s *refDecay) Eval(p Params, now, cost int64) Result {
	v := s.at(p, now)
	r := Result{Used: v, ResetAfter: s.wait(p, now, v, DecayZero, lnZero)}
	if r.Allowed = fits(v, cost, p.Rate); !r.Allowed {
		to, lnTo := retryLevel(p, cost)
		r.RetryAfter = s.wait(p, now, v, to, lnTo)
	}
	return r
}

func (s *refDecay) Record(p Params, now, cost int64) (float64, int64) {
	s.setS(s.at(p, now) + float64(cost))
	s.T0 = max(now, s.T0)
	return s.S, s.wait(p, now, s.S, DecayZero, lnZero)
}

func (s *refDecay) Check(p Params, now, cost int64, shadow bool) Outcome {
	v := s.at(p, now)
	o := Outcome{Allowed: fits(v, cost, p.Rate), Used: v}
	if !o.Allowed {
		to, lnTo := retryLevel(p, cost)
		o.RetryAfter = s.wait(p, now, v, to, lnTo)
	}
	if (o.Allowed || shadow) && cost > 0 {
		s.setS(v + float64(cost))
		s.T0 = max(now, s.T0)
		o.Used = s.S
		v = s.S
	}
	o.ResetAfter = s.wait(p, now, v, DecayZero, lnZero)
	return o
}

func (s *refDecay) Refund(p Params, at, cost int64) {
	back := float64(cost)
	if s.T0 > at {
		back *= math.Exp(-float64(s.T0-at) / float64(p.Window))
	}
	s.setS(max(0, s.S-back))
}

// TestDecayIsRefDecay runs random operations (Eval, Record, Check with and
// without shadow, Refund, and states set field by field with ln S
// unknown, as redisstore builds them) on pairs of a Decay and a refDecay
// in step: every Result, Outcome, usage, wait and count must be the same
// bits. Limits, windows, costs and clock steps are random over their whole
// ranges, with many steps landing the waits near whole µs.
func TestDecayIsRefDecay(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(31, 32))
	const pairs, ops = 20_000, 60
	for range pairs {
		w := max(1, int64(math.Exp(rng.Float64()*math.Log(3.2e15))))
		if rng.IntN(3) == 0 {
			w = []int64{1e6, 60e6, 3600e6, 86_400e6}[rng.IntN(4)]
		}
		p := Params{Rate: 1 + int64(math.Exp(rng.Float64()*math.Log(1e9))), Window: w}
		if rng.IntN(3) == 0 {
			p.Rate = 1 + rng.Int64N(2000)
		}
		var s Decay
		var r refDecay
		now := int64(1_700_000_000_000_000)
		s.T0, r.T0 = now, now
		for range ops {
			switch rng.IntN(6) {
			case 0:
				now -= rng.Int64N(1000) // the clock steps back
			case 1:
				now += 1 + rng.Int64N(3)
			default:
				now += int64(rng.Float64() * rng.Float64() * 3 * float64(w))
			}
			cost := rng.Int64N(p.Rate + 2)
			if rng.IntN(4) == 0 {
				cost = 1
			}
			switch rng.IntN(7) {
			case 0:
				got, want := s.Eval(p, now, cost), r.Eval(p, now, cost)
				if got != want || math.Float64bits(got.Used) != math.Float64bits(want.Used) {
					t.Fatalf("W %d rate %d cost %d now %d S %v: Eval %+v, ref %+v", w, p.Rate, cost, now, r.S, got, want)
				}
			case 1:
				gu, gr := s.Record(p, now, cost)
				wu, wr := r.Record(p, now, cost)
				if math.Float64bits(gu) != math.Float64bits(wu) || gr != wr {
					t.Fatalf("W %d rate %d cost %d now %d: Record %v %d, ref %v %d", w, p.Rate, cost, now, gu, gr, wu, wr)
				}
			case 2:
				at := now - rng.Int64N(w+1)
				s.Refund(p, at, cost)
				r.Refund(p, at, cost)
			case 3:
				// A state set field by field, ln S unknown.
				v := math.Exp(rng.Float64()*math.Log(1e12)) * 1e-3
				s = Decay{S: v, T0: now - rng.Int64N(w+1)}
				r = refDecay{S: v, T0: s.T0}
			default:
				shadow := rng.IntN(5) == 0
				got, want := s.Check(p, now, cost, shadow), r.Check(p, now, cost, shadow)
				if got != want || math.Float64bits(got.Used) != math.Float64bits(want.Used) {
					t.Fatalf("W %d rate %d cost %d now %d: Check %+v, ref %+v", w, p.Rate, cost, now, got, want)
				}
			}
			if math.Float64bits(s.S) != math.Float64bits(r.S) || s.T0 != r.T0 {
				t.Fatalf("state %v@%d, ref %v@%d", s.S, s.T0, r.S, r.T0)
			}
		}
	}
}

// TestLnApprox holds lnApprox within lnApproxErr·(1 + |ln x|) of
// math.Log (itself within an ulp of ln x, which the bound leaves room
// for): on random float64s over the whole normal range, on counts from
// 1e-3 to 1e12 as decay's states hold, around 1 and 2, and at both ends
// of each of the table's parts, where r is largest.
func TestLnApprox(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(41, 42))
	worst := 0.0
	try := func(x float64) {
		got, want := lnApprox(x), math.Log(x)
		e := math.Abs(got-want) / (1 + math.Abs(want))
		worst = max(worst, e)
		// math.Log's own error (an ulp of want) is within the slack.
		if e > lnApproxErr-2.3e-16 {
			t.Fatalf("lnApprox(%v) = %v, math.Log %v: error %.3g of 1+|ln x|, bound %.3g", x, got, want, e, lnApproxErr)
		}
	}
	for range 2_000_000 {
		if b := rng.Uint64()>>1 | 1<<52; b>>52 != 2047 {
			try(math.Float64frombits(b)) // any positive normal
		}
		try(math.Exp(rng.Float64()*math.Log(1e15)) * 1e-3)
		try(1 + (rng.Float64()-0.5)*1e-3)
		try(2 + (rng.Float64()-0.5)*1e-3)
		try(float64(1 + rng.IntN(100_000)))
	}
	for e := -1022; e <= 1023; e += 7 {
		for i := range 129 {
			m := 1 + float64(i)/128
			for _, x := range []float64{m, math.Nextafter(m, 0), math.Nextafter(m, 3)} {
				if x >= 1 && x < 2 {
					try(math.Ldexp(x, e))
				}
			}
		}
	}
	for _, x := range []float64{0, 5e-324, 2.2e-308, math.Inf(1), math.NaN(), -1} {
		if got, want := lnApprox(x), math.Log(x); math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("lnApprox(%v) = %v, math.Log %v", x, got, want)
		}
	}
	t.Logf("largest error %.3g of 1+|ln x| (bound %.3g)", worst, lnApproxErr)
}
