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
	// lnS is ln S (lnApprox(S), within 5e-16 of 1 + |ln S|), kept by
	// every method that sets S, or 0 when not known (a state built field
	// by field, as redisstore does, or S of 0; a logarithm of exactly 0
	// reads as unknown too): it spares the waits their
	// logarithms (see wait). It sits in
	// padding the entry's size class already had: no memory per state.
	lnS float64
}

// setS sets the count and its logarithm (lnApprox's: the waits need it
// to about 1e-15, not to the last bit).
func (s *Decay) setS(v float64) {
	s.S, s.lnS = v, 0
	if v > 0 {
		s.lnS = lnApprox(v)
	}
}

// lnTab[i] holds, for the i-th of 128 equal parts of [1, 2), the float64
// nearest 1/c, c the middle of the part, and −math.Log of that float64.
var lnTab = func() (t [128][2]float64) {
	for i := range t {
		inv := 1 / (1 + (float64(i)+0.5)/128)
		t[i] = [2]float64{inv, -math.Log(inv)}
	}
	return t
}()

// ln2Hi + ln2Lo is ln 2; ln2Hi has 32 significant bits, so k·ln2Hi is
// exact for any exponent k of a float64.
const (
	ln2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
	ln2Lo = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
)

// lnApproxErr bounds |lnApprox(x) − ln x| / (1 + |ln x|). With x = 2^k·m,
// m in [1, 2), and inv, −ln inv the table's pair for m's part:
// ln x = k·ln 2 + ln inv⁻¹ + log1p(r), r = m·inv − 1, |r| < 2⁻⁸ + 2⁻⁵².
// The errors: r's product rounded (1.2e-16 absolute), −ln inv from
// math.Log (under one ulp of at most 0.7, 1.2e-16), log1p's series cut
// after r⁶ (|r|⁷/7 < 3e-18) and its rounding (under 1e-18), ln 2 split
// (k·ln2Lo rounded and ln2Hi + ln2Lo − ln 2, under 1e-19·|k|), and the
// two last additions (half an ulp of 0.7 and of the result: 6e-17 +
// 1.2e-16·|ln x|): under 4.2e-16 + 1.2e-16·|ln x|, and 5e-16 covers it.
// TestLnApprox measures the bound against math.Log.
const lnApproxErr = 5e-16

// lnApprox returns ln x for x > 0 within lnApproxErr·(1 + |ln x|): the
// accuracy decay's waits need (see waitMargin), at about half math.Log's
// cost (no division, a degree-6 polynomial over a table's part instead
// of degree 14 over [√½, √2]). Zero, subnormals, infinities and NaN go
// to math.Log.
func lnApprox(x float64) float64 {
	b := math.Float64bits(x)
	k := int64(b>>52) - 1023 // the sign bit, if set, makes k ≥ 1025
	if uint64(k+1022) >= 2046 {
		return math.Log(x)
	}
	t := &lnTab[b>>45&127]
	r := math.Float64frombits(b&(1<<52-1)|1023<<52)*t[0] - 1
	r2 := r * r
	p := r + r2*((-0.5+r*(1.0/3))+r2*((-0.25+r*0.2)+r2*(-1.0/6)))
	kf := float64(k)
	return kf*ln2Hi + (t[1] + (kf*ln2Lo + p))
}

func (s *Decay) at(p Params, now int64) float64 {
	v := s.S
	if now > s.T0 {
		v *= decayExp(-float64(now-s.T0) / float64(p.Window))
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
// operands, under 7e-16 in all, to which ln S from lnApprox adds at most
// lnApproxErr (5e-16) of 1 + |ln S|: under 1.2e-15; 1e-14 leaves a factor
// of eight to spare.
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
	if s.lnS != 0 {
		if t, ok := waitFrom(float64(p.Window), s.lnS, lnTo, s.since(now)); ok {
			return t
		}
	}
	return decayWait(p, v, to)
}

// since returns the µs from T0 to now, 0 if now is not after T0.
func (s *Decay) since(now int64) float64 {
	if now > s.T0 {
		return float64(now - s.T0)
	}
	return 0
}

// waitLn is wait's shortcut from s.lnS, for a count above the level: ok is
// false when it cannot tell the µs for sure.
func (s *Decay) waitLn(p Params, now int64, lnTo float64) (t int64, ok bool) {
	if s.lnS == 0 {
		return 0, false
	}
	return waitFrom(float64(p.Window), s.lnS, lnTo, s.since(now))
}

// waitFrom is the shortcut's arithmetic: x = W·(ln S − ln to) − dt, sure
// when x ± the margin round up to the same µs. Since lo ≤ x + d,
// ceil(lo) = ceil(x + d) exactly when x + d ≤ ceil(lo): one rounding.
func waitFrom(w, lnS, lnTo, dt float64) (t int64, ok bool) {
	x := w*(lnS-lnTo) - dt
	d := (w*(math.Abs(lnS)+math.Abs(lnTo)+1) + dt + math.Abs(x)) * waitMargin
	if lo := x - d; lo > 0 {
		if c := math.Ceil(lo); x+d <= c {
			return int64(c), true
		}
	}
	return 0, false
}

// Eval implements State.
func (s *Decay) Eval(p Params, now, cost int64) Result {
	v := s.at(p, now)
	r := Result{Used: v, Allowed: fits(v, cost, p.Rate)}
	if r.Allowed {
		r.ResetAfter = s.wait(p, now, v, DecayZero, lnZero)
	} else {
		r.ResetAfter, r.RetryAfter = s.deniedWaits(p, now, v, cost)
	}
	return r
}

// deniedWaits returns the reset and retry waits of a cost that does not
// fit, v the count at now: RetryAfter = W·ln(S/(Rate − cost)), and a cost
// equal to Rate waits for the state to count as empty. Both come from
// ln S at once when they can (a denied hot key: but for about one check
// in 10⁴), each otherwise from wait.
func (s *Decay) deniedWaits(p Params, now int64, v float64, cost int64) (reset, retry int64) {
	to, lnTo := retryLevel(p, cost)
	if s.lnS != 0 && v > to { // to ≥ DecayZero: both waits are due
		w, dt := float64(p.Window), s.since(now)
		reset, ok := waitFrom(w, s.lnS, lnZero, dt)
		retry, ok2 := waitFrom(w, s.lnS, lnTo, dt)
		if ok && ok2 {
			return reset, retry
		}
	}
	return s.wait(p, now, v, DecayZero, lnZero), s.wait(p, now, v, to, lnTo)
}

// Record implements State.
func (s *Decay) Record(p Params, now, cost int64) (float64, int64) {
	s.setS(s.at(p, now) + float64(cost))
	s.T0 = max(now, s.T0)
	return s.S, s.recordedWait(p)
}

// recordedWait is the reset wait just after a record, wait(p, now, S,
// DecayZero, lnZero) with now ≤ T0: W·(ln S − ln DecayZero) when sure (a
// count at or below DecayZero, recorded at cost 0, never is: x ≤ 0 within
// the margin, and decayWait returns 0).
func (s *Decay) recordedWait(p Params) int64 {
	if s.lnS != 0 {
		if t, ok := waitFrom(float64(p.Window), s.lnS, lnZero, 0); ok {
			return t
		}
	}
	return decayWait(p, s.S, DecayZero)
}

// Check is Decide for one hit on s, fused: Eval, then Record when the hit
// is allowed (or shadow) and cost > 0, computing the decayed count once.
// The outcome and the state are bit for bit those of Eval and Record; only
// the work that Record's result replaces (Eval's ResetAfter) is skipped.
func (s *Decay) Check(p Params, now, cost int64, shadow bool) Outcome {
	v := s.at(p, now)
	o := Outcome{Allowed: fits(v, cost, p.Rate), Used: v}
	if !(o.Allowed || shadow) || cost <= 0 {
		if o.Allowed {
			o.ResetAfter = s.wait(p, now, v, DecayZero, lnZero)
		} else {
			o.ResetAfter, o.RetryAfter = s.deniedWaits(p, now, v, cost)
		}
		return o
	}
	if !o.Allowed {
		to, lnTo := retryLevel(p, cost)
		o.RetryAfter = s.wait(p, now, v, to, lnTo)
	}
	s.setS(v + float64(cost))
	s.T0 = max(now, s.T0)
	o.Used = s.S
	o.ResetAfter = s.recordedWait(p)
	return o
}
