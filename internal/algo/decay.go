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

func decayWait(p Params, from, to float64) int64 {
	if from <= to {
		return 0
	}
	return ceilMicros(float64(p.Window) * math.Log(from/to))
}

// Eval implements State.
func (s *Decay) Eval(p Params, now, cost int64) Result {
	v := s.at(p, now)
	r := Result{Used: v, ResetAfter: decayWait(p, v, DecayZero)}
	if r.Allowed = fits(v, cost, p.Rate); !r.Allowed {
		// RetryAfter = W·ln(S/(Rate − cost)); a cost equal to Rate waits
		// for the state to count as empty.
		r.RetryAfter = decayWait(p, v, max(float64(p.Rate-cost), DecayZero))
	}
	return r
}

// Record implements State.
func (s *Decay) Record(p Params, now, cost int64) (float64, int64) {
	s.S, s.T0 = s.at(p, now)+float64(cost), max(now, s.T0)
	return s.S, decayWait(p, s.S, DecayZero)
}

// Check is Decide for one hit on s, fused: Eval, then Record when the hit
// is allowed (or shadow) and cost > 0, computing the decayed count once.
// The outcome and the state are bit for bit those of Eval and Record; only
// the work that Record's result replaces (Eval's ResetAfter) is skipped.
func (s *Decay) Check(p Params, now, cost int64, shadow bool) Outcome {
	v := s.at(p, now)
	o := Outcome{Allowed: fits(v, cost, p.Rate), Used: v}
	if !o.Allowed {
		o.RetryAfter = decayWait(p, v, max(float64(p.Rate-cost), DecayZero))
	}
	if (o.Allowed || shadow) && cost > 0 {
		s.S, s.T0 = v+float64(cost), max(now, s.T0)
		o.Used = s.S
		v = s.S
	}
	o.ResetAfter = decayWait(p, v, DecayZero)
	return o
}
