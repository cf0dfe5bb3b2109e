package algo

import (
	"math"
	mrand "math/rand/v2"
	"testing"
)

// TestDecayWaitIsDecayWait holds Decay.wait (waits from the cached ln S,
// without a logarithm) to decayWait, the definition the Lua scripts share:
// on random counts (1e-3 to 1e12), windows (1 µs to sluice.MaxWindow), elapsed times
// (none to 60 windows) and levels (DecayZero and Rate − cost), and on
// counts chosen so that the exact wait lies within a billionth of a µs of
// a whole µs, the two return the same µs every time. It also checks that
// the shortcut answers nearly all random cases with windows up to a day, so the test cannot
// pass by always falling back.
func TestDecayWaitIsDecayWait(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(21, 22))
	const n = 2_000_000
	fast, above := 0, 0
	for i := range n {
		w := int64(math.Exp(rng.Float64() * math.Log(3.2e15)))
		w = max(w, 1)
		p := Params{Rate: 1 + rng.Int64N(5000), Window: w}
		var s Decay
		s.setS(math.Exp(rng.Float64()*math.Log(1e15)) * 1e-3)
		s.T0 = 1_700_000_000_000_000
		now := s.T0
		switch rng.IntN(4) {
		case 0:
		case 1:
			now -= rng.Int64N(1000)
		default:
			now += int64(rng.Float64() * 60 * float64(w))
		}
		to, lnTo := DecayZero, lnZero
		if rng.IntN(2) == 0 {
			to, lnTo = retryLevel(p, rng.Int64N(p.Rate+1))
		}
		if i%4 == 0 {
			// A count whose exact wait from T0 is within 1e-9 µs of a
			// whole µs k: S = to·exp((k + dt ± ε)/W).
			dt := float64(max(0, now-s.T0))
			k := float64(1 + rng.Int64N(max(1, min(w*20, 1<<40))))
			s.setS(to * math.Exp((k+dt+(rng.Float64()-0.5)*2e-9)/float64(w)))
		}
		v := s.at(p, now)
		got, want := s.wait(p, now, v, to, lnTo), decayWait(p, v, to)
		if got != want {
			t.Fatalf("S %v T0 %d now %d W %d to %v: wait %d, decayWait %d", s.S, s.T0, now, w, to, got, want)
		}
		if v > to && i%4 != 0 && w <= 86_400_000_000 {
			above++
			if _, ok := s.waitLn(p, now, lnTo); ok {
				fast++
			}
		}
	}
	t.Logf("shortcut taken in %d of %d random cases with a wait and a window of a day or less", fast, above)
	if fast < above*9/10 {
		t.Errorf("shortcut taken in %d of %d random cases with a wait and a window of a day or less, want nearly all", fast, above)
	}
}
