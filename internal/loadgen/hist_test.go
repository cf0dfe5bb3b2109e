package loadgen

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsRoundTrip(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 127, 128, 129, 255, 256, 1000, 1 << 20, 1<<40 + 12345, 1<<62 + 1, 1<<63 - 1} {
		b := bucketOf(v)
		if b <= prev && v > 0 {
			t.Errorf("bucketOf(%d) = %d, not after %d", v, b, prev)
		}
		prev = b
		if b >= buckets {
			t.Fatalf("bucketOf(%d) = %d, out of %d buckets", v, b, buckets)
		}
		if hi := valueOf(b); hi < v || float64(hi-v) > float64(v)/128+1 {
			t.Errorf("value %d: bucket %d upper bound %d", v, b, hi)
		}
	}
}

// Quantiles agree with sorted samples within the histogram's precision.
func TestQuantileAgainstSorted(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h, a, b Histogram
	samples := make([]int64, 0, 100_000)
	for i := range 100_000 {
		v := int64(r.ExpFloat64() * 200_000) // about 200 µs, long tail
		samples = append(samples, v)
		h.Record(time.Duration(v))
		if i%2 == 0 {
			a.Record(time.Duration(v))
		} else {
			b.Record(time.Duration(v))
		}
	}
	a.Merge(&b)
	slices.Sort(samples)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		idx := int(float64(len(samples))*q+0.999999) - 1
		want := samples[max(idx, 0)]
		for name, hist := range map[string]*Histogram{"direct": &h, "merged": &a} {
			got := int64(hist.Quantile(q))
			if got < want || float64(got-want) > float64(want)/100+1 {
				t.Errorf("%s q%.3f: got %d, want %d (+0.8%%)", name, q, got, want)
			}
		}
	}
	if h.Max() != time.Duration(samples[len(samples)-1]) || h.Count() != 100_000 {
		t.Errorf("max %v count %d", h.Max(), h.Count())
	}
	var empty Histogram
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 {
		t.Error("empty histogram: want zeros")
	}
}
