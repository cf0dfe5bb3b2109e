package algo

import (
	"fmt"
	"math/big"
	"testing"
)

// periods are the units of ParseLimit, in µs.
var periods = map[string]int64{"s": sec, "m": 60 * sec, "h": 3600 * sec, "d": 86400 * sec}

// params returns the Params of Rate per W for algorithm a, with buckets'
// default of ten buckets per window.
func params(a string, rate, w int64) Params {
	p := Params{Rate: rate, Window: w, Bucket: w}
	if a == "buckets" {
		p.Bucket = w / 10
	}
	return p
}

// TestFreshAdmitsExactlyRate: at one frozen instant, a fresh limit admits
// exactly Rate unit checks, for every algorithm and every rate 1–1000 per
// second, minute, hour and day, and the check after them is denied with a
// RetryAfter > 0.
func TestFreshAdmitsExactlyRate(t *testing.T) {
	const now = t0 + 123_457 // not aligned to anything
	for _, a := range algorithms {
		for unit, w := range periods {
			t.Run(a+"/"+unit, func(t *testing.T) {
				for rate := int64(1); rate <= 1000; rate++ {
					s, p := newState(a), params(a, rate, w)
					for i := range rate {
						if r := s.Eval(p, now, 1); !r.Allowed {
							t.Fatalf("%dr/%s: check %d denied: %+v", rate, unit, i+1, r)
						}
						s.Record(p, now, 1)
					}
					r := s.Eval(p, now, 1)
					if r.Allowed || r.RetryAfter <= 0 {
						t.Fatalf("%dr/%s: check %d: %+v, want denied with a RetryAfter", rate, unit, rate+1, r)
					}
					if got := Remaining(rate, r.Used); got != 0 {
						t.Fatalf("%dr/%s: Remaining %d after Rate checks, want 0", rate, unit, got)
					}
				}
			})
		}
	}
}

// TestGCRARetryAfterExact: for GCRA, waiting exactly RetryAfter passes and
// one µs less does not, for every rate 1–1000 per s/m/h/d, after a fresh
// burst and after each of the next Rate unit checks made as soon as
// allowed.
func TestGCRARetryAfterExact(t *testing.T) {
	for unit, w := range periods {
		for rate := int64(1); rate <= 1000; rate++ {
			s, p, now := new(GCRA), params("gcra", rate, w), t0+999_999
			s.Record(p, now, rate)
			for range min(rate, 50) {
				r := s.Eval(p, now, 1)
				if r.Allowed {
					t.Fatalf("%dr/%s: allowed past the burst: %+v", rate, unit, r)
				}
				if s.Eval(p, now+r.RetryAfter-1, 1).Allowed {
					t.Fatalf("%dr/%s: allowed 1 µs before RetryAfter %d", rate, unit, r.RetryAfter)
				}
				now += r.RetryAfter
				if got := s.Eval(p, now, 1); !got.Allowed {
					t.Fatalf("%dr/%s: denied after exactly RetryAfter %d: %+v", rate, unit, r.RetryAfter, got)
				}
				s.Record(p, now, 1)
			}
		}
	}
}

// TestLargeRates: at the largest supported rates a fresh limit still
// admits exactly Rate, spent in a few large costs, for every algorithm.
func TestLargeRates(t *testing.T) {
	for _, a := range algorithms {
		for _, rate := range []int64{3_000_000, 10_000_000, 999_999_937, 1_000_000_000} {
			for unit, w := range periods {
				t.Run(fmt.Sprintf("%s/%dr/%s", a, rate, unit), func(t *testing.T) {
					s, p, now := newState(a), params(a, rate, w), t0+7
					costs := []int64{rate / 3, rate / 3, rate - 2*(rate/3) - 1, 1}
					for i, c := range costs {
						if r := s.Eval(p, now, c); !r.Allowed {
							t.Fatalf("cost %d (part %d) denied: %+v", c, i, r)
						}
						s.Record(p, now, c)
					}
					if r := s.Eval(p, now, 1); r.Allowed {
						t.Fatalf("one past Rate allowed: %+v", r)
					}
				})
			}
		}
	}
}

// TestMulDiv against math/big, at the edges the GCRA uses.
func TestMulDiv(t *testing.T) {
	rng := newRand(3)
	for range 100_000 {
		m := 1 + rng.int63n(1_000_000_000)
		a, b := rng.int63n(m+1), rng.int63n(m)
		q, r := MulDiv(a, b, m)
		var want, rem big.Int
		want.QuoRem(new(big.Int).Mul(big.NewInt(a), big.NewInt(b)), big.NewInt(m), &rem)
		if q != want.Int64() || r != rem.Int64() {
			t.Fatalf("MulDiv(%d, %d, %d) = %d, %d; want %v, %v", a, b, m, q, r, &want, &rem)
		}
	}
}
