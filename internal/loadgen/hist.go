package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// subBits is the number of bits a Histogram keeps below a value's top bit:
// 2^7 = 128 sub-buckets per power of two, so any recorded value is
// reported within 1/128 (0.8%) of itself.
const subBits = 7

const (
	subCount = 1 << subBits
	// linear values below 2*subCount get a bucket each.
	linear = 2 * subCount
	// buckets covers every non-negative int64: after the linear ones,
	// subCount per power of two from 2^(subBits+1) to 2^62.
	buckets = linear + (62-subBits)*subCount
)

// Histogram counts latencies in log-linear buckets, like an HDR histogram:
// fixed memory (about 57 KiB), constant-time Record, and percentiles within
// 0.8% of the true value. The zero value is empty and ready. Not safe for
// concurrent use: give each worker its own and Merge them.
type Histogram struct {
	counts [buckets]uint64
	n      uint64
	sum    float64
	max    int64
}

// bucketOf returns the bucket of v >= 0 (nanoseconds).
func bucketOf(v int64) int {
	if v < linear {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - 1 - subBits // >= 1
	sub := int(v>>shift) - subCount              // in [0, subCount)
	return linear + (shift-1)*subCount + sub
}

// valueOf returns the largest value bucket i holds: percentiles never
// under-report.
func valueOf(i int) int64 {
	if i < linear {
		return int64(i)
	}
	i -= linear
	shift := i/subCount + 1
	sub := int64(i%subCount) + subCount
	return (sub+1)<<shift - 1
}

// Record adds one latency. Negative values count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += float64(v)
	h.max = max(h.max, v)
}

// Merge adds every count of o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest recorded value, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean returns the mean of the recorded values, or 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the value below or at which a share q (0 to 1) of the
// recorded values fall, rounded up to its bucket's upper bound and never
// above Max. It returns 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(valueOf(i), h.max))
		}
	}
	return time.Duration(h.max)
}
