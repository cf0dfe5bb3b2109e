package algo

import (
	"math"
	mrand "math/rand/v2"
	"testing"
)

// TestDecayExpIsExp holds decayExp to math.Exp bit for bit on 6 million
// random exponents of decay's range (whole range, near 0 where a
// check's lie, and tiny), and on the special ones; and, when the
// start-up check found expFMA exact, expFMA itself on the same inputs.
func TestDecayExpIsExp(t *testing.T) {
	t.Logf("expFMA in use: %v", expExact)
	rng := mrand.New(mrand.NewPCG(51, 52))
	try := func(x float64) {
		if got, want := decayExp(x), math.Exp(x); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("decayExp(%v) = %v, math.Exp %v", x, got, want)
		}
		if expExact && x > -700 && x <= 0 {
			if got, want := expFMA(x), math.Exp(x); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("expFMA(%v) = %v, math.Exp %v", x, got, want)
			}
		}
	}
	for range 2_000_000 {
		try(-rng.Float64() * 710)
		try(-rng.Float64() * 0.7)
		try(-math.Exp(rng.Float64()*60 - 55))
	}
	for _, x := range []float64{0, math.Copysign(0, -1), -699.9999, -700, -745, -1e300, math.Inf(-1), math.NaN(), 5e-324, -5e-324, 1, 710} {
		try(x)
	}
}

// expNoFMA is math.archExp's path for CPUs without FMA: the same series,
// each product rounded.
func expNoFMA(x float64) float64 {
	k := math.RoundToEven(x * expLog2e)
	r := x - float64(k*expLn2U)
	r = r - float64(k*expLn2L)
	r *= 0.0625
	p := float64(2.4801587301587301587e-5 * r)
	for _, c := range []float64{1.9841269841269841270e-4, 1.3888888888888888889e-3, 8.3333333333333333333e-3, 4.1666666666666666667e-2, 1.6666666666666666667e-1, 0.5} {
		p = float64(float64(p+c) * r)
	}
	p += 1.0
	r *= p
	r *= r + 2
	r *= r + 2
	r *= r + 2
	r *= r + 2
	r += 1.0
	return r * math.Float64frombits(uint64(int64(k)+1023)<<52)
}

// TestExpChecksSeeNoFMA shows that the start-up check would turn expFMA
// off on a CPU without FMA: on its inputs archExp's other path gives
// other bits, many times.
func TestExpChecksSeeNoFMA(t *testing.T) {
	differ := 0
	for i := range expCheckInputs {
		x := expCheckInput(i)
		if math.Float64bits(expNoFMA(x)) != math.Float64bits(expFMA(x)) {
			differ++
		}
	}
	t.Logf("the path without FMA differs on %d of %d inputs", differ, expCheckInputs)
	if differ < 10 {
		t.Errorf("the path without FMA differs on %d of %d inputs of the start-up check, want at least 10", differ, expCheckInputs)
	}
	if expChecks(expNoFMA) {
		t.Error("the start-up check accepts the path without FMA")
	}
}
