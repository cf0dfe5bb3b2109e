package algo

import "math/bits"

// Buckets is the bucketed sliding-window state. The window of n = W/R
// buckets of length R (R = Params.Bucket) slides one bucket at a time; with
// b the bucket holding now and e the µs elapsed in it,
//
//	Used = Counts[b−n]·(R − e)/R + Σ Counts[b−n+1 … b]
//
// the oldest bucket weighted by the part of it still inside (now − W, now].
// With R = W this is exactly Window.
type Buckets struct {
	Head   int64   // index of the newest bucket in Counts
	Counts []int64 // ring of n+1 counters; Counts[k mod (n+1)] is bucket k
}

// ring reads a state's buckets with the ring slot of Head found once, so
// that reading a bucket takes no division.
type ring struct {
	counts     []int64
	head, slot int64 // slot = Head mod len(counts)
}

func (s *Buckets) ring() ring {
	var r ring
	r.set(s)
	return r
}

// set makes r read s. The checks build their ring in place with it:
// the ring that ring() returns is built in a temporary and copied, 16
// bytes at a time, from words just stored one by one, and the loads
// that cannot be forwarded from those stores stall the check (perf
// annotate of a hot buckets check: a third of Eval's samples).
func (r *ring) set(s *Buckets) {
	r.counts, r.head, r.slot = s.Counts, s.Head, 0
	if len(s.Counts) > 0 {
		r.slot = floorMod(s.Head, int64(len(s.Counts)))
	}
}

// count returns bucket k's cost as seen from a state whose newest bucket is
// Head: zero for buckets newer than Head or too old to be kept. Bucket k is
// slot (Head − (Head − k)) mod len(counts), and 0 <= Head − k < len.
func (r *ring) count(k int64) int64 {
	n := int64(len(r.counts))
	if k > r.head || k <= r.head-n {
		return 0
	}
	i := r.slot - (r.head - k)
	if i < 0 {
		i += n
	}
	return r.counts[i]
}

// window returns the oldest bucket's cost, count(b−n), and the sum of the n
// newer ones, count(b−n+1 … b): the two terms of Used at bucket b. The kept
// ones are at most two runs of consecutive slots, summed without a test
// per slot.
func (r *ring) window(b, n int64) (old, sum int64) {
	size := int64(len(r.counts))
	lo, hi := max(b-n+1, r.head-size+1), min(b, r.head) // the kept ones
	if lo <= hi {
		i := r.slot - (r.head - lo) // lo's slot
		if i < 0 {
			i += size
		}
		end := i + hi - lo + 1
		if end > size {
			for _, c := range r.counts[:end-size] {
				sum += c
			}
			end = size
		}
		for _, c := range r.counts[i:end] {
			sum += c
		}
	}
	return r.count(b - n), sum
}

// usedAt returns the usage e µs into a bucket from the oldest bucket's cost
// and the sum of the newer ones (ring.window).
// An empty oldest bucket adds +0 (e < Bucket): sum alone, bit for bit,
// without the division.
func usedAt(p Params, old, sum, e int64) float64 {
	if old == 0 {
		return float64(sum)
	}
	return float64(old)*float64(p.Bucket-e)/float64(p.Bucket) + float64(sum)
}

// at returns the bucket of now and the µs elapsed in it. A clock behind
// the newest bucket (a step back, or another process's clock) is read as
// the start of that bucket, as Window.at does: nothing recorded is
// forgotten and the estimate errs towards denying.
func (s *Buckets) at(p Params, now int64) (b, e int64) {
	if start, ok := startOf(s.Head, p.Bucket, now); ok && len(s.Counts) > 0 && now-start < p.Bucket {
		return s.Head, now - start // still in the newest bucket: no division
	}
	b = floorDiv(now, p.Bucket)
	if len(s.Counts) > 0 && b < s.Head {
		return s.Head, 0
	}
	return b, now - b*p.Bucket
}

// span returns n = Window/Bucket, without a division when the ring has
// n+1 buckets (always, but for a new ring or one of other parameters):
// n·Bucket = Window, the product checked whole.
func span(p Params, size int) int64 {
	if n := uint64(size) - 1; size > 1 {
		if hi, lo := bits.Mul64(n, uint64(p.Bucket)); hi == 0 && lo == uint64(p.Window) {
			return int64(n)
		}
	}
	return p.Window / p.Bucket
}

// Eval implements State.
func (s *Buckets) Eval(p Params, now, cost int64) Result {
	b, e := s.at(p, now)
	var v ring
	v.set(s)
	n := span(p, len(s.Counts))
	old, sum := v.window(b, n)
	r := Result{Used: usedAt(p, old, sum, e), ResetAfter: v.resetAfter(p, n, now)}
	if r.Allowed = fits(r.Used, cost, p.Rate); !r.Allowed {
		r.RetryAfter = v.retryAfter(p, n, b, e, sum, cost)
	}
	return r
}

// retryAfter walks the bucket boundaries ahead of now. Within a bucket only
// the oldest bucket's weight falls, linearly, so each step solves
// old·(R − e)/R + rest + cost ≤ Rate for e. Once every kept bucket has left
// the window any cost ≤ Rate fits, so the walk ends within n+1 steps.
// sum is Σ count(b−n+1 … b) (ring.window), n is Window/Bucket.
//
// With a ring of n+1 buckets (but an empty one), b at or after Head
// (always, but for an empty ring) and cost ≤ Rate,
// the oldest bucket of each step is the next slot of the ring, read in turn
// (bucket k−n is slot Head's + 1 + k − Head, as n ≡ −1 mod n+1) and the
// steps after b only take it off; otherwise retryAfterSkip walks.
// TestBucketsRetrySkipIsStepByStep holds both to the step-by-step walk.
// Either ends, and reads no slot past the ring, whatever its counts hold
// (TestBucketsEvalAnyCounts).
func (s *ring) retryAfter(p Params, n, b, e, sum, cost int64) int64 {
	size := int64(len(s.counts))
	if size != n+1 || b < s.head || b > s.head+n || cost > p.Rate {
		return s.retryAfterSkip(p, n, b, e, sum, cost)
	}
	r := p.Bucket
	rest := sum
	i := s.slot + 1 + (b - s.head) // the slot of bucket b−n: < 2·size
	if i >= size {
		i -= size
	}
	old, start := s.counts[i], e // step k = b
	for k := b; ; {
		if room := p.Rate - rest - cost; room >= 0 {
			if at := fitsAt(r, room, old, start); at < float64(r) {
				return ceilMicros(float64((k-b)*r-e) + at)
			}
		}
		// Step k+1: bucket k+1−n leaves, if it is kept. Until the
		// usage fits, the empty ones change nothing: pass them.
		k, old, start = k+1, 0, 0
		if k-n <= s.head {
			if i++; i == size {
				i = 0
			}
			if old = s.counts[i]; old == 0 && p.Rate-rest-cost < 0 {
				// rest > 0: a kept bucket up to Head has a cost.
				// When Head's holds all of it (a key spent within
				// one bucket, the usual denial), the others are
				// empty (counts are not negative): go to it.
				if last := s.head + n; k < last && rest == s.counts[s.slot] {
					k, i, old = last, s.slot, rest
				}
				for last := s.head + n; old == 0 && k < last; {
					k++
					if i++; i == size {
						i = 0
					}
					old = s.counts[i]
				}
			}
		} else if p.Rate-rest-cost < 0 {
			return tornRetry(p)
		}
		rest -= old
	}
}

// tornRetry is what the walks return when every kept bucket has left the
// window and the cost still does not fit. With the sum the walk was given
// that cannot be (the cost is at most Rate): only a ring whose counts
// changed while it was read (memstore's peek, which then discards the
// result) gets here, and the walk ends instead of looping for ever.
func tornRetry(p Params) int64 { return p.Window }

// fitsAt is when, in µs into a bucket step of r µs counted from start,
// the cost fits: the bucket leaving at that step (old) leaves in
// proportion to the step's elapsed time, and room is what is left to
// spare once all of it has. The walks return it when it is < r.
//
// It takes the larger of the two instants by a comparison rather than
// max, whose handling of NaN and −0 sat on a denial's chain of dependent
// operations: neither occurs (start ≥ 0; old > 0 makes the other finite,
// and r − y is +0, never −0, when y = r), so the result is max's, bit
// for bit.
func fitsAt(r, room, old, start int64) float64 {
	at := float64(start)
	if old > 0 {
		if x := float64(r) - float64(room)*float64(r)/float64(old); x > at {
			at = x
		}
	}
	return at
}

// retryAfterSkip is retryAfter for any ring: the walk of every bucket
// boundary, skipping the steps at which nothing leaves the window.
func (s *ring) retryAfterSkip(p Params, n, b, e, sum, cost int64) int64 {
	r := p.Bucket
	rest := sum // Σ count(k−n+1 … k), kept as k advances
	for k := b; ; k++ {
		old := s.count(k - n)
		start := int64(0)
		switch {
		case k == b:
			start = e
		case k > s.head: // count(k) is 0
			if old == 0 && p.Rate-rest-cost < 0 {
				if k-n > s.head {
					return tornRetry(p)
				}
				// Nothing changes until a bucket with a cost leaves:
				// skip to it. One exists, kept and after k − n, since
				// rest > 0.
				j := s.nextCost(k - n + 1)
				k, old = j+n, s.count(j)
			}
			rest -= old
		default:
			rest += s.count(k) - old
		}
		if room := p.Rate - rest - cost; room >= 0 {
			if at := fitsAt(r, room, old, start); at < float64(r) {
				return ceilMicros(float64((k-b)*r-e) + at)
			}
		}
	}
}

// nextCost returns the first bucket from j on with a cost, reading the
// ring's slots in turn, or Head when none before it has one.
func (s *ring) nextCost(j int64) int64 {
	size := int64(len(s.counts))
	j = max(j, s.head-size+1) // older buckets are not kept: no cost
	if j >= s.head {
		return j
	}
	i := s.slot - (s.head - j)
	if i < 0 {
		i += size
	}
	for j < s.head && s.counts[i] == 0 {
		j++
		if i++; i == size {
			i = 0
		}
	}
	return j
}

// resetAfter is the µs until the newest non-empty bucket has left the
// window, n = Window/Bucket. It reads the slots from Head's backwards.
func (s *ring) resetAfter(p Params, n, now int64) int64 {
	i := s.slot
	for k := s.head; k > s.head-int64(len(s.counts)); k-- {
		if s.counts[i] > 0 {
			return max(0, (k+n+1)*p.Bucket-now)
		}
		if i--; i < 0 {
			i = int64(len(s.counts)) - 1
		}
	}
	return 0
}

// Record implements State.
func (s *Buckets) Record(p Params, now, cost int64) (float64, int64) {
	n := p.Window / p.Bucket
	if len(s.Counts) != int(n+1) {
		s.Counts, s.Head = make([]int64, n+1), floorDiv(now, p.Bucket)
	}
	b, e := s.at(p, now)
	s.add(b, n, cost)
	var v ring
	v.set(s)
	old, sum := v.window(b, n)
	return usedAt(p, old, sum, e), v.resetAfter(p, n, now)
}

// add records cost in bucket b >= Head (a clock behind records into Head,
// see at), first emptying the buckets between Head and b. The ring has
// n+1 buckets.
func (s *Buckets) add(b, n, cost int64) {
	if b > s.Head {
		for k := s.Head + 1; k <= b && k <= s.Head+n+1; k++ {
			s.Counts[floorMod(k, n+1)] = 0
		}
		s.Head = b
	}
	s.Counts[floorMod(b, n+1)] += cost
}

// Check is Decide for one hit on s, fused: Eval, then Record when the hit
// is allowed (or shadow) and cost > 0. The buckets are summed once:
// recording cost at b adds cost to the sum of the n newest buckets and
// leaves the oldest one as Eval saw it (buckets after Head, which Record
// empties, already read as zero). The outcome and the state are bit for
// bit those of Eval and Record (TestCheckIsEvalRecord).
func (s *Buckets) Check(p Params, now, cost int64, shadow bool) Outcome {
	n := span(p, len(s.Counts))
	if len(s.Counts) != 0 && len(s.Counts) != int(n+1) {
		return check(s, p, now, cost, shadow) // a ring of other parameters
	}
	b, e := s.at(p, now)
	var v ring
	v.set(s)
	old, sum := v.window(b, n)
	used := usedAt(p, old, sum, e)
	o := Outcome{Allowed: fits(used, cost, p.Rate), Used: used}
	if !o.Allowed {
		o.RetryAfter = v.retryAfter(p, n, b, e, sum, cost)
	}
	if (o.Allowed || shadow) && cost > 0 {
		switch {
		case len(s.Counts) > 0 && b == s.Head:
			// Still the newest bucket (most checks): its slot is known.
			s.Counts[v.slot] += cost
		case len(s.Counts) == 0:
			s.Counts, s.Head = make([]int64, n+1), b
			fallthrough
		default:
			s.add(b, n, cost)
			v.set(s)
		}
		o.Used = usedAt(p, old, sum+cost, e)
	}
	o.ResetAfter = v.resetAfter(p, n, now)
	return o
}

func floorMod(a, n int64) int64 {
	m := a % n
	if m < 0 {
		m += n
	}
	return m
}
