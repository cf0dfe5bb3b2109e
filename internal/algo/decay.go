package algo

import "math"

// DecayZero is the usage below which a Decay state counts as empty: an
// exponential never reaches zero, and a hundredth of a unit is nothing.
const DecayZero = 0.01

// Decay is the AR1 state: an exponentially decayed count with time
// constant W,
//
//	S(now) = S(t0) · exp(−(now − t0)/W)
//
// A cost c fits when S(now) + c ≤ Rate; recording adds c at now. A steady
// Rate per W converges to Rate; a burst of Rate from idle passes, after which
// about one unit per W·ln(Rate/(Rate−1)) passes.
type Decay struct {
	S  float64 // count at T
	T0 int64   // µs since the epoch
	// lnS is math.Log(S), kept by every method that sets S, or 0 when not
	// known (a state built field by field, as redisstore does, or S of 0
	// or 1): it spares the waits their logarithms (see wait). It sits in
	// padding the entry's size class already had: no memory per state.
	lnS float64
}

// setS sets the count and its logarithm.
func (s *Decay) setS(v float64) {
	s.S, s.lnS = v, 0
	if v > 0 {
		s.lnS = math.Log(v)
	}
}

func (s *Decay) at(p Params, now int64) float64 {
	v := s.S
	if now > s.T0 {
		v *= math.Exp(-float64(now-s.T0) / float64(p.Window))
	}
	if v < DecayZero {
		return 0
	}
	return v
}

// decayWait is the µs until a count of from decays to to, rounded up: the
// definition, which the Lua scripts compute with the same operations.
func decayWait(p Params, from, to float64) int64 {
	if from <= to {
		return 0
	}
	return ceilMicros(float64(p.Window) * math.Log(from/to))
}

// lnZero is math.Log(DecayZero); lnInts[n] is math.Log(n): the logarithms
// of the levels a wait decays to (DecayZero, Rate − cost), computed once.
var (
	lnZero = math.Log(DecayZero)
	lnInts = func() (t [1024]float64) {
		for n := range t {
			t[n] = math.Log(float64(n))
		}
		return t
	}()
)

// retryLevel returns the level a count must decay to for cost to fit,
// max(Rate − cost, DecayZero), and its logarithm.
func retryLevel(p Params, cost int64) (to, lnTo float64) {
	n := p.Rate - cost
	switch {
	case n <= 0:
		return DecayZero, lnZero
	case n < int64(len(lnInts)):
		return float64(n), lnInts[n]
	}
	return float64(n), math.Log(float64(n))
}

// waitMargin bounds, relative to the magnitudes involved, how far apart
// rounding can put wait's formula and decayWait's: each is a handful of
// operations correct to an ulp or so (about 1e-16 relative) of their
// operands, under 7e-16 in all; 1e-14 leaves a factor of fifteen to spare.
const waitMargin = 1e-14

// wait returns decayWait(p, v, to), with v = s.at(p, now) and lnTo =
// math.Log(to), without a logarithm when s.lnS is known:
// W·ln(v/to) = W·(ln S − ln to) − (now − T0) exactly, and when no rounding
// of either formula (bounded by waitMargin) can move the value across a
// whole µs, both round up to the same µs. Otherwise (about one call in
// 10⁴ with a one-minute window, or lnS unknown) it is decayWait itself.
// TestDecayWaitIsDecayWait holds the two together.
func (s *Decay) wait(p Params, now int64, v, to, lnTo float64) int64 {
	if v <= to {
		return 0
	}
	if t, ok := s.waitLn(p, now, lnTo); ok {
		return t
	}
	return decayWait(p, v, to)
}

// waitLn is wait's shortcut from s.lnS, for a count above the level: ok is
// false when it cannot tell the µs for sure.
func (s *Decay) waitLn(p Params, now int64, lnTo float64) (t int64, ok bool) {
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

// Eval implements State.
func (s *Decay) Eval(p Params, now, cost int64) Result {
	v := s.at(p, now)
	r := Result{Used: v, ResetAfter: s.wait(p, now, v, DecayZero, lnZero)}
	if r.Allowed = fits(v, cost, p.Rate); !r.Allowed {
		// RetryAfter = W·ln(S/(Rate − cost)); a cost equal to Rate waits
		// for the state to count as empty.
		to, lnTo := retryLevel(p, cost)
		r.RetryAfter = s.wait(p, now, v, to, lnTo)
	}
	return r
}

// Record implements State.
func (s *Decay) Record(p Params, now, cost int64) (float64, int64) {
	s.setS(s.at(p, now) + float64(cost))
	s.T0 = max(now, s.T0)
	return s.S, s.wait(p, now, s.S, DecayZero, lnZero)
}

// Check is Decide for one hit on s, fused: Eval, then Record when the hit
// is allowed (or shadow) and cost > 0, computing the decayed count once.
// The outcome and the state are bit for bit those of Eval and Record; only
// the work that Record's result replaces (Eval's ResetAfter) is skipped.
func (s *Decay) Check(p Params, now, cost int64, shadow bool) Outcome {
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
