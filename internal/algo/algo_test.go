package algo

import (
	"math"
	"testing"
)

const sec = int64(1_000_000)

// t0 is an aligned instant far from the epoch, like a real clock reading.
const t0 = 1_700_000_040 * sec // a multiple of 60 s

// algorithms and newState are internal/ident's table as these tests see
// it: the table imports this package, so they cannot; ident's TestTable
// holds the table to the same names and types.
var algorithms = []string{"sliding-window", "buckets", "log", "decay", "gcra"}

func newState(name string) State {
	return map[string]func() State{
		"sliding-window": func() State { return new(Window) },
		"buckets":        func() State { return new(Buckets) },
		"log":            func() State { return new(Log) },
		"decay":          func() State { return new(Decay) },
		"gcra":           func() State { return new(GCRA) },
	}[name]()
}

func tenPerMinute(algorithm string) Params {
	p := Params{Rate: 10, Window: 60 * sec, Bucket: 60 * sec}
	if algorithm == "buckets" {
		p.Bucket = 10 * sec
	}
	return p
}

// TestTenPerMinute is DESIGN.md's worked example: ten checks at t = 0 pass,
// the eleventh is denied with a RetryAfter that depends on the algorithm.
func TestTenPerMinute(t *testing.T) {
	wantRetry := map[string]float64{
		"log":            60 * float64(sec),
		"sliding-window": 66 * float64(sec),
		"buckets":        61 * float64(sec),
		"decay":          60 * float64(sec) * math.Log(10.0/9.0),
		"gcra":           6 * float64(sec),
	}
	for _, a := range algorithms {
		t.Run(a, func(t *testing.T) {
			s, p := newState(a), tenPerMinute(a)
			for i := range 10 {
				if r := s.Eval(p, t0, 1); !r.Allowed {
					t.Fatalf("check %d denied: %+v", i+1, r)
				}
				s.Record(p, t0, 1)
			}
			r := s.Eval(p, t0, 1)
			if r.Allowed {
				t.Fatalf("11th check allowed: %+v", r)
			}
			if got, want := float64(r.RetryAfter), wantRetry[a]; math.Abs(got-want) > 1 {
				t.Errorf("RetryAfter = %v µs, want %v µs", got, want)
			}
			if r := s.Eval(p, t0+r.RetryAfter, 1); !r.Allowed {
				t.Errorf("after RetryAfter: denied %+v", r)
			}
			if early := s.Eval(p, t0+r.RetryAfter-sec/100, 1); early.Allowed {
				t.Errorf("10 ms before RetryAfter: allowed %+v", early)
			}
		})
	}
}

// TestCloudflareExample: 50r/m, previous window 42, current 18, 15 s in.
func TestCloudflareExample(t *testing.T) {
	p := Params{Rate: 50, Window: 60 * sec, Bucket: 60 * sec}
	s := &Window{Index: t0 / p.Window, Prev: 42, Cur: 18}
	r := s.Eval(p, t0+15*sec, 1)
	if r.Allowed || r.Used != 49.5 || Remaining(p.Rate, r.Used) != 0 {
		t.Fatalf("got %+v, want denied with Used 49.5", r)
	}
	if want := 45*float64(sec) - 31*60*float64(sec)/42; math.Abs(float64(r.RetryAfter)-want) > 1 {
		t.Errorf("RetryAfter = %d µs, want %.0f", r.RetryAfter, want)
	}
}

func TestDecideAllOrNothing(t *testing.T) {
	p := Params{Rate: 5, Window: 10 * sec, Bucket: 10 * sec}
	c := Params{Rate: 3, Window: 10 * sec, Bucket: 10 * sec}
	res, a, b := newState("log"), newState("log"), newState("log")
	out := make([]Outcome, 2)
	check := func(consumer State) bool {
		ok, _, _ := Decide([]Hit{{State: res, Params: p}, {State: consumer, Params: c}}, out, t0, 1)
		return ok
	}
	for i, want := range []bool{true, true, true, false} {
		if got := check(a); got != want {
			t.Fatalf("A check %d: got %v, want %v", i+1, got, want)
		}
	}
	for i, want := range []bool{true, true, false} {
		if got := check(b); got != want {
			t.Fatalf("B check %d: got %v, want %v", i+1, got, want)
		}
	}
	if got := res.Eval(p, t0, 0).Used; got != 5 {
		t.Errorf("resource used %v, want 5", got)
	}
	if got := b.Eval(c, t0, 0).Used; got != 2 {
		t.Errorf("B used %v, want 2", got)
	}
}

// TestRetryAfterIsTight checks, on seeded random traffic for every
// algorithm, that each denial's RetryAfter is the wait: at now+RetryAfter
// the same cost fits, and (for exact algorithms) one microsecond earlier it
// does not; for the estimating ones, 1% of the wait earlier it does not.
func TestRetryAfterIsTight(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a, func(t *testing.T) {
			p := Params{Rate: 20, Window: 10 * sec, Bucket: 10 * sec}
			if a == "buckets" {
				p.Bucket = sec
			}
			rng := newRand(1)
			s, now := newState(a), t0
			denials := 0
			for range 20_000 {
				now += rng.int63n(300_000)
				cost := 1 + rng.int63n(3)
				r := s.Eval(p, now, cost)
				if r.Allowed {
					s.Record(p, now, cost)
					continue
				}
				denials++
				if got := s.Eval(p, now+r.RetryAfter, cost); !got.Allowed {
					t.Fatalf("at now+RetryAfter(%d µs) still denied: %+v", r.RetryAfter, got)
				}
				early := r.RetryAfter - 1
				if a != "log" && a != "gcra" {
					early = r.RetryAfter - r.RetryAfter/100 - 1
				}
				if early > 0 && s.Eval(p, now+early, cost).Allowed {
					t.Fatalf("RetryAfter %d µs is not tight: allowed at %d µs", r.RetryAfter, early)
				}
			}
			if denials < 100 {
				t.Fatalf("only %d denials: the traffic does not exercise the limit", denials)
			}
		})
	}
}

// TestNeverOveradmit counts, under random traffic, the admissions in every
// sliding window of length W. log never exceeds Rate. gcra's model allows a
// burst of Rate plus Rate per W, so any W holds at most 2·Rate (TAT moves at
// most W past the window's start and W past its end). The estimators'
// documented worst case is 2·Rate too (uneven traffic in the previous
// window).
func TestNeverOveradmit(t *testing.T) {
	for _, a := range []string{"log", "gcra", "sliding-window", "buckets"} {
		t.Run(a, func(t *testing.T) {
			p := Params{Rate: 50, Window: 10 * sec, Bucket: 10 * sec}
			if a == "buckets" {
				p.Bucket = sec
			}
			bound := 2 * p.Rate
			if a == "log" {
				bound = p.Rate
			}
			rng := newRand(7)
			s, now := newState(a), t0
			var admitted []int64
			for range 50_000 {
				now += rng.int63n(100_000)
				if s.Eval(p, now, 1).Allowed {
					s.Record(p, now, 1)
					admitted = append(admitted, now)
				}
			}
			lo := 0
			for hi, at := range admitted {
				for admitted[lo] <= at-p.Window {
					lo++
				}
				if n := int64(hi - lo + 1); n > bound {
					t.Fatalf("%d admitted in (%d − W, %d], bound %d", n, at, at, bound)
				}
			}
		})
	}
}

// rand is a tiny deterministic generator (xorshift), so the test does not
// depend on math/rand's stream across Go versions.
type rand struct{ x uint64 }

func newRand(seed uint64) *rand { return &rand{x: seed*0x9E3779B97F4A7C15 + 1} }

func (r *rand) int63n(n int64) int64 {
	r.x ^= r.x << 13
	r.x ^= r.x >> 7
	r.x ^= r.x << 17
	return int64(r.x>>1) % n
}

// TestClockBehindForgetsNothing: a reading from before the newest recorded
// event (a clock stepping back, or another process's clock) must not lose
// what was recorded, for any algorithm.
func TestClockBehindForgetsNothing(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a, func(t *testing.T) {
			s, p := newState(a), tenPerMinute(a)
			s.Record(p, t0+70*sec, 4) // the next window
			s.Record(p, t0+10*sec, 1) // the clock steps back a window
			if used := s.Eval(p, t0+70*sec, 0).Used; used < 4.9 {
				t.Errorf("Used at the newest instant = %v, want about 5", used)
			}
		})
	}
}
