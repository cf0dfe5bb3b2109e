package algo

import (
	"math"
	mrand "math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// checker is a state with a fused Check.
type checker interface {
	State
	Check(p Params, now, cost int64, shadow bool) Outcome
}

// TestCheckIsEvalRecord holds each fused Check to Eval then Record (check):
// on random traffic (clock steps forward, still and back; costs 0–3 and
// the whole rate; shadow and not; parameters changing under a state) both
// give the same outcome, bit for bit, and leave the same state.
func TestCheckIsEvalRecord(t *testing.T) {
	fresh := map[string]func() (fast, ref checker){
		"buckets": func() (checker, checker) { return new(Buckets), new(Buckets) },
		"log":     func() (checker, checker) { return new(Log), new(Log) },
		"decay":   func() (checker, checker) { return new(Decay), new(Decay) },
		"window":  func() (checker, checker) { return new(Window), new(Window) },
		"gcra":    func() (checker, checker) { return new(GCRA), new(GCRA) },
	}
	params := []Params{
		{Rate: 20, Window: 10_000_000, Bucket: 1_000_000},
		{Rate: 3, Window: 1_000_000, Bucket: 1_000_000},
		{Rate: 7, Window: 900_000, Bucket: 300_000},
		{Rate: 1000, Window: 60_000_000, Bucket: 6_000_000},
	}
	for name, mk := range fresh {
		rng := mrand.New(mrand.NewPCG(7, 8))
		for run := range 200 {
			fast, ref := mk()
			p := params[run%len(params)]
			now := int64(1_700_000_000_000_000) + rng.Int64N(1e9) - 5e8
			for i := range 500 {
				switch rng.IntN(20) {
				case 0:
					now -= rng.Int64N(2 * p.Window)
				case 1:
					p = params[rng.IntN(len(params))]
				case 2, 3:
				default:
					now += rng.Int64N(p.Window / 4)
				}
				cost := rng.Int64N(4)
				if rng.IntN(30) == 0 {
					cost = p.Rate // a cost above Rate never fits: stores refuse it
				}
				shadow := rng.IntN(4) == 0
				got := fast.Check(p, now, cost, shadow)
				want := check(ref, p, now, cost, shadow)
				if !sameOutcome(got, want) || !sameState(fast, ref) {
					t.Fatalf("%s: run %d check %d (%+v now %d cost %d shadow %v): Check %+v %+v, Eval+Record %+v %+v",
						name, run, i, p, now, cost, shadow, got, fast, want, ref)
				}
			}
		}
	}
}

func sameOutcome(a, b Outcome) bool {
	return a.Allowed == b.Allowed && math.Float64bits(a.Used) == math.Float64bits(b.Used) &&
		a.RetryAfter == b.RetryAfter && a.ResetAfter == b.ResetAfter
}

// sameState compares states bit for bit; a Log's spare capacity and a
// nil or empty slice do not count.
func sameState(a, b checker) bool {
	switch a := a.(type) {
	case *Decay:
		b := b.(*Decay)
		return math.Float64bits(a.S) == math.Float64bits(b.S) && a.T0 == b.T0
	case *Log:
		return slices.Equal(a.Events(), b.(*Log).Events()) && a.sum == b.(*Log).sum && a.sum == logSum(a)
	}
	return reflect.DeepEqual(a, b)
}

// logSum adds up a log's event costs: what Log.sum must equal.
func logSum(s *Log) (sum int64) {
	for _, ev := range s.Events() {
		sum += ev.Cost
	}
	return sum
}
