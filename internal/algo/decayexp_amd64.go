package algo

import "math"

// decayExp is math.Exp, bit for bit, for decay's exponents. On amd64
// math.Exp is an assembly function (math.archExp) behind the stack-based
// call convention: its argument and result cross memory, and the call
// costs a hot decay check several ns on top of the series itself.
// expFMA is the same series written in Go (archExp's path for CPUs with
// AVX and FMA, operation for operation), which the compiler inlines.
// It is used only when expExact: a check at start-up that it gives
// math.Exp's bits on inputs over its whole range, among them inputs on
// which archExp's other path (no FMA) differs, so a CPU without FMA, or
// a Go release whose math.Exp computes otherwise, keeps math.Exp.
// TestDecayExpIsExp holds decayExp to math.Exp on 6 million random
// exponents.
func decayExp(x float64) float64 {
	if expExact && x > -700 && x <= 0 {
		return expFMA(x)
	}
	return math.Exp(x)
}

var expExact = expChecks(expFMA)

// expChecks reports whether exp is math.Exp on expCheckInputs.
func expChecks(exp func(float64) float64) bool {
	for i := range expCheckInputs {
		x := expCheckInput(i)
		if math.Float64bits(exp(x)) != math.Float64bits(math.Exp(x)) {
			return false
		}
	}
	return true
}

// expCheckInputs inputs, from 0 down to about −699, denser near 0 where
// decay's exponents mostly lie.
const expCheckInputs = 512

func expCheckInput(i int) float64 {
	f := float64(i) / expCheckInputs
	return -699 * f * f * f * (1 + float64(i%7)/997)
}

// The constants of math.archExp (src/math/exp_amd64.s): ln 2 in two
// parts and the Taylor coefficients 1/8! … 1/2!, 1.
const (
	expLog2e = 1.4426950408889634073599246810018920
	expLn2U  = 0.69314718055966295651160180568695068359375
	expLn2L  = 0.28235290563031577122588448175013436025525412068e-12
)

// expFMA is math.archExp's FMA path for x in (−700, 0]: the exponent
// k = round(x·log₂e) (CVTSD2SL, to nearest even) is in [−1010, 0], so
// neither overflow nor the subnormal path of its ldexp is reached.
//
// For x ≥ −0.34 (a decay check's exponent, −Δt/W, nearly always) k is
// ±0, so the reduction leaves x as it is (x − 0·ln 2, fused, is x) and
// the scaling by 2^k is by 1: both are skipped, which shortens the
// chain of dependent operations by about a quarter.
func expFMA(x float64) float64 {
	if x >= -0.34 { // |x·log₂e| < 0.491: k = ±0
		return expSeries(x * 0.0625)
	}
	k := math.RoundToEven(x * expLog2e)
	r := math.FMA(-k, expLn2U, x)
	r = math.FMA(-k, expLn2L, r)
	return expSeries(r*0.0625) * math.Float64frombits(uint64(int64(k)+1023)<<52)
}

// expSeries is archExp's series on the reduced argument r: e^(16r).
func expSeries(r float64) float64 {
	p := math.FMA(r, 2.4801587301587301587e-5, 1.9841269841269841270e-4)
	p = math.FMA(r, p, 1.3888888888888888889e-3)
	p = math.FMA(r, p, 8.3333333333333333333e-3)
	p = math.FMA(r, p, 4.1666666666666666667e-2)
	p = math.FMA(r, p, 1.6666666666666666667e-1)
	p = math.FMA(r, p, 0.5)
	p = math.FMA(r, p, 1.0)
	r *= p
	r *= r + 2
	r *= r + 2
	r *= r + 2
	return math.FMA(r, r+2, 1.0)
}
