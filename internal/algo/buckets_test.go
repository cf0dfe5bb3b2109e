package algo

import (
	mrand "math/rand/v2"
	"testing"
)

// retryAfterRef is ring.retryAfter before it learned to skip the steps at
// which nothing leaves the window: one step per bucket boundary.
func (s *ring) retryAfterRef(p Params, b, e, sum, cost int64) int64 {
	n, r := p.Window/p.Bucket, p.Bucket
	rest := sum
	for k := b; ; k++ {
		old := s.count(k - n)
		start := int64(0)
		switch {
		case k == b:
			start = e
		case k > s.head:
			rest -= old
		default:
			rest += s.count(k) - old
		}
		if room := p.Rate - rest - cost; room >= 0 {
			at := float64(start)
			if old > 0 {
				at = max(at, float64(r)-float64(room)*float64(r)/float64(old))
			}
			if at < float64(r) {
				return ceilMicros(float64((k-b)*r-e) + at)
			}
		}
	}
}

// windowRef is ring.window bucket by bucket.
func (r *ring) windowRef(b, n int64) (old, sum int64) {
	for k := b - n + 1; k <= b; k++ {
		sum += r.count(k)
	}
	return r.count(b - n), sum
}

// resetAfterRef is ring.resetAfter bucket by bucket.
func (r *ring) resetAfterRef(p Params, now int64) int64 {
	n := p.Window / p.Bucket
	for k := r.head; k > r.head-int64(len(r.counts)); k-- {
		if r.count(k) > 0 {
			return max(0, (k+n+1)*p.Bucket-now)
		}
	}
	return 0
}

// TestBucketsRetrySkipIsStepByStep holds retryAfter (its slot walk and its
// skip), window and resetAfter to the walk of
// every bucket boundary, on random rings (sparse and dense, clocks ahead of
// the newest bucket by up to two windows) and every cost up to the rate.
func TestBucketsRetrySkipIsStepByStep(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(31, 32))
	for range 20_000 {
		n := 1 + rng.Int64N(30)
		p := Params{Rate: 1 + rng.Int64N(50), Bucket: 1 + rng.Int64N(1000)}
		p.Window = n * p.Bucket
		var s Buckets
		now := int64(1_700_000_000_000) + rng.Int64N(1e6)
		for range rng.IntN(40) {
			now += rng.Int64N(p.Window/2 + 1)
			s.Record(p, now, 1+rng.Int64N(p.Rate))
		}
		now += rng.Int64N(2*p.Window + 1)
		b, e := s.at(p, now)
		v := s.ring()
		old, sum := v.window(b, n)
		if o, su := v.windowRef(b, n); o != old || su != sum {
			t.Fatalf("%+v %+v now %d: window %d %d, bucket by bucket %d %d", p, s, now, old, sum, o, su)
		}
		if got, want := v.resetAfter(p, n, now), v.resetAfterRef(p, now); got != want {
			t.Fatalf("%+v %+v now %d: resetAfter %d, bucket by bucket %d", p, s, now, got, want)
		}
		for cost := int64(1); cost <= p.Rate; cost++ {
			got, want := v.retryAfter(p, n, b, e, sum, cost), v.retryAfterRef(p, b, e, sum, cost)
			if got != want {
				t.Fatalf("%+v %+v now %d cost %d: retryAfter %d, step by step %d", p, s, now, cost, got, want)
			}
			if skip := v.retryAfterSkip(p, n, b, e, sum, cost); skip != want {
				t.Fatalf("%+v %+v now %d cost %d: retryAfterSkip %d, step by step %d", p, s, now, cost, skip, want)
			}
		}
	}
}

// TestAtWithoutDivision holds the shortcut of Window.at and Buckets.at
// (still in the state's window or newest bucket: no division) to the
// division, on states near and far from now, negative and huge indexes
// whose start overflows, and clocks before the epoch.
func TestAtWithoutDivision(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(41, 42))
	pick := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return rng.Int64() - rng.Int64()
		case 1:
			return rng.Int64N(1 << 40)
		}
		return 1_700_000_000_000_000 + rng.Int64N(1e9)
	}
	for range 200_000 {
		w := 1 + rng.Int64N(1<<uint(rng.IntN(50)))
		now := pick()
		idx := floorDiv(now, w) + rng.Int64N(5) - 2
		if rng.IntN(4) == 0 {
			idx = pick()
		}
		s := Window{Index: idx, Cur: 3, Prev: 4}
		i, prev, cur, e := s.at(Params{Window: w}, now)
		wi := floorDiv(now, w)
		want := [4]int64{wi, 0, 0, now - wi*w}
		switch {
		case wi < idx:
			want = [4]int64{idx, 4, 3, 0}
		case wi == idx:
			want = [4]int64{wi, 4, 3, now - wi*w}
		case wi == idx+1:
			want = [4]int64{wi, 3, 0, now - wi*w}
		}
		if got := [4]int64{i, prev, cur, e}; got != want {
			t.Fatalf("Window %+v W %d now %d: at %v, want %v", s, w, now, got, want)
		}
		bs := Buckets{Head: idx, Counts: make([]int64, 3)}
		b, be := bs.at(Params{Bucket: w}, now)
		wb, we := wi, now-wi*w
		if wi < idx {
			wb, we = idx, 0
		}
		if b != wb || be != we {
			t.Fatalf("Buckets head %d R %d now %d: at %d %d, want %d %d", idx, w, now, b, be, wb, we)
		}
	}
}

// TestLogSumIsEvents: a log's running sum stays the total of its events
// through random records, fused checks and refunds (clock forward, still
// and back), and the usage found from it is the sum of the live events
// added up one by one, as the log did before it kept a sum.
func TestLogSumIsEvents(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(51, 52))
	p := Params{Rate: 50, Window: 1_000_000}
	for range 300 {
		var s Log
		now := int64(1_700_000_000_000_000)
		for i := range 400 {
			switch rng.IntN(10) {
			case 0:
				now -= rng.Int64N(p.Window)
			case 1, 2:
			default:
				now += rng.Int64N(p.Window / 5)
			}
			cost := 1 + rng.Int64N(3)
			switch rng.IntN(4) {
			case 0:
				s.Record(p, now, cost)
			case 1:
				at := RecordedAt(&s, p, now)
				s.Record(p, now, cost)
				s.Refund(p, at, cost+rng.Int64N(2)-1)
			default:
				s.Check(p, now, cost, rng.IntN(3) == 0)
			}
			if s.sum != logSum(&s) {
				t.Fatalf("op %d: sum %d, events add up to %d: %+v", i, s.sum, logSum(&s), s.Events())
			}
			probe := now + rng.Int64N(2*p.Window) - p.Window/2
			var want int64
			for _, ev := range s.Events() {
				if ev.At > probe-p.Window {
					want += ev.Cost
				}
			}
			if used := s.used(p, probe); used != want {
				t.Fatalf("op %d: usage at %d is %d, live events add up to %d", i, probe, used, want)
			}
		}
	}
}

// TestBucketsEvalAnyCounts: Eval reads a ring's slots in place, so counts
// holding anything at all, and changing between the sum and the retry walk
// (as memstore's peek may read them while another check writes, before it
// discards the result), never make it index past the ring, panic or loop
// without end. The torn walk is the retry walks given a sum that is not
// their ring's.
func TestBucketsEvalAnyCounts(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(81, 82))
	word := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return rng.Int64() - rng.Int64()
		case 1:
			return -rng.Int64N(100)
		}
		return rng.Int64N(100)
	}
	for range 100_000 {
		n := 1 + rng.Int64N(40)
		p := Params{Rate: 1 + rng.Int64N(100), Bucket: 1 + rng.Int64N(1e6)}
		p.Window = n * p.Bucket
		now := int64(1_700_000_000_000_000) + rng.Int64N(1e12)
		size := n + 1
		if rng.IntN(4) == 0 {
			size = rng.Int64N(45) // a ring of other parameters
		}
		s := Buckets{Head: floorDiv(now, p.Bucket) + rng.Int64N(3*n+3) - 2*n - 2, Counts: make([]int64, size)}
		for i := range s.Counts {
			if rng.IntN(3) > 0 {
				s.Counts[i] = word()
			}
		}
		cost := rng.Int64N(p.Rate + 1)
		s.Eval(p, now, cost)
		b, e := s.at(p, now)
		v := s.ring()
		sum := word()
		v.retryAfter(p, n, b, e, sum, cost)
		v.retryAfterSkip(p, n, b, e, sum, cost)
	}
}
