package algo

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

// count returns bucket k's cost as seen from a state whose newest bucket is
// Head: zero for buckets newer than Head or too old to be kept.
func (s *Buckets) count(k int64) int64 {
	n := int64(len(s.Counts))
	if n == 0 || k > s.Head || k <= s.Head-n {
		return 0
	}
	return s.Counts[floorMod(k, n)]
}

// usedAt returns the usage at bucket b, e µs into it, with no cost added
// after Head.
func (s *Buckets) usedAt(p Params, b, e int64) float64 {
	n := p.Window / p.Bucket
	var sum int64
	for k := b - n + 1; k <= b; k++ {
		sum += s.count(k)
	}
	return float64(s.count(b-n))*float64(p.Bucket-e)/float64(p.Bucket) + float64(sum)
}

// at returns the bucket of now and the µs elapsed in it. A clock behind
// the newest bucket (a step back, or another process's clock) is read as
// the start of that bucket, as Window.at does: nothing recorded is
// forgotten and the estimate errs towards denying.
func (s *Buckets) at(p Params, now int64) (b, e int64) {
	b = floorDiv(now, p.Bucket)
	if len(s.Counts) > 0 && b < s.Head {
		return s.Head, 0
	}
	return b, now - b*p.Bucket
}

// Eval implements State.
func (s *Buckets) Eval(p Params, now, cost int64) Result {
	b, e := s.at(p, now)
	r := Result{Used: s.usedAt(p, b, e), ResetAfter: s.resetAfter(p, now)}
	if r.Allowed = fits(r.Used, cost, p.Rate); !r.Allowed {
		r.RetryAfter = s.retryAfter(p, b, e, cost)
	}
	return r
}

// retryAfter walks the bucket boundaries ahead of now. Within a bucket only
// the oldest bucket's weight falls, linearly, so each step solves
// old·(R − e)/R + rest + cost ≤ Rate for e. Once every kept bucket has left
// the window any cost ≤ Rate fits, so the walk ends within n+1 steps.
func (s *Buckets) retryAfter(p Params, b, e, cost int64) int64 {
	n, r := p.Window/p.Bucket, p.Bucket
	var rest int64 // Σ Counts[k−n+1 … k], kept as k advances
	for k := b - n + 1; k <= b; k++ {
		rest += s.count(k)
	}
	for k := b; ; k++ {
		if k > b {
			rest += s.count(k) - s.count(k-n)
		}
		start := int64(0)
		if k == b {
			start = e
		}
		old := s.count(k - n)
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

// resetAfter is the µs until the newest non-empty bucket has left the
// window.
func (s *Buckets) resetAfter(p Params, now int64) int64 {
	n := p.Window / p.Bucket
	for k := s.Head; k > s.Head-int64(len(s.Counts)); k-- {
		if s.count(k) > 0 {
			return max(0, (k+n+1)*p.Bucket-now)
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
	if b > s.Head {
		for k := s.Head + 1; k <= b && k <= s.Head+n+1; k++ {
			s.Counts[floorMod(k, n+1)] = 0
		}
		s.Head = b
	}
	s.Counts[floorMod(b, n+1)] += cost // b >= Head: a clock behind records into Head
	return s.usedAt(p, b, e), s.resetAfter(p, now)
}

func floorMod(a, n int64) int64 {
	m := a % n
	if m < 0 {
		m += n
	}
	return m
}
