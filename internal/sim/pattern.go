package sim

import "math"

// plan is what a source's stream decides before its arrivals.
type plan struct {
	class         Class
	n             int64
	factor        float64 // steady: rate as a fraction of the threshold
	start, length float64 // µs: the session of a steady or background source
}

// plan draws source i's plan from the start of its stream r. For the
// background, the size was drawn (and allocated) by NewTrace; plan draws the
// same weight again to keep the stream in step, then the session.
func (t *Trace) plan(r *rng, i int) plan {
	c := t.Class(i)
	p := plan{class: c}
	d, w, rate := float64(t.o.Duration), float64(t.o.Window), float64(t.o.Rate)
	mean := t.p.requestShare[c] * float64(t.o.Requests) / float64(t.first[c+1]-t.first[c])
	switch c {
	case SteadyUnder, SteadyOver:
		p.n = max(1, int64(mean*r.uniform(0.25, 1.75)))
		p.factor = r.uniform(0.80, 0.99)
		if c == SteadyOver {
			p.factor = r.uniform(1.01, 1.25)
		}
		period := w / (p.factor * rate)
		if float64(p.n)*period > d {
			p.n = max(1, int64(d/period))
		}
		p.length = float64(p.n) * period
		p.start = r.uniform(0, max(0, d-p.length))
	case Bursty:
		p.n = max(1, int64(mean*r.uniform(0.25, 1.75)))
	case Background:
		r.pareto(paretoShape)
		p.n = t.sizes[i]
		lo := min(d, max(w, float64(p.n)*w/(t.p.backgroundMax*rate)))
		p.length = math.Exp(r.uniform(math.Log(lo), math.Log(d)))
		p.start = r.uniform(0, d-p.length)
	}
	return p
}

// Requests implements Workload: it appends source i's request instants to
// buf, ascending, all in [0, Duration).
func (t *Trace) Requests(buf []int64, i int) []int64 {
	r := newRNG(t.o.Seed, uint64(i))
	p := t.plan(&r, i)
	switch p.class {
	case SteadyUnder, SteadyOver:
		return appendRegular(buf, &r, p)
	case Bursty:
		return t.appendBursts(buf, &r, p.n)
	}
	return appendPoisson(buf, &r, p.start, p.length, p.n, t.o.Duration)
}

// appendRegular appends p.n instants one period apart, each delayed by up
// to half a period: a steady client with jitter, never two in one period.
func appendRegular(buf []int64, r *rng, p plan) []int64 {
	period := p.length / float64(p.n)
	for k := range p.n {
		buf = append(buf, int64(p.start+(float64(k)+0.5*r.float())*period))
	}
	return buf
}

// appendBursts appends n requests in bursts of about 1.4 thresholds each
// (30–250%), one burst in each of k equal slots of the duration, each
// burst's requests spread at random over 5–100% of a window.
func (t *Trace) appendBursts(buf []int64, r *rng, n int64) []int64 {
	k := max(1, min(n, int64(math.Round(float64(n)/(1.4*float64(t.o.Rate))))))
	weights := rng{s: r.next()} // a child stream, replayed: sizes need the sum first
	replay, sum := weights, 0.0
	for range k {
		sum += replay.uniform(0.3, 2.5)
	}
	slot := float64(t.o.Duration) / float64(k)
	given := int64(0)
	for j := range k {
		size := int64(float64(n) * weights.uniform(0.3, 2.5) / sum)
		if j == k-1 {
			size = n - given
		}
		given += size
		length := min(slot, float64(t.o.Window)*r.uniform(0.05, 1))
		start := float64(j)*slot + r.uniform(0, slot-length)
		buf = appendPoisson(buf, r, start, length, size, t.o.Duration)
	}
	return buf
}

// appendPoisson appends n instants spread uniformly at random over
// [start, start+length), in order: the arrivals of a Poisson process given
// their number. The gaps are exponential variates scaled to the length,
// which needs their sum first, so the stream is read twice.
func appendPoisson(buf []int64, r *rng, start, length float64, n, duration int64) []int64 {
	replay, total := *r, 0.0
	for range n + 1 {
		total += replay.exp()
	}
	acc := 0.0
	for range n {
		acc += r.exp()
		buf = append(buf, min(duration-1, int64(start+length*acc/total)))
	}
	r.exp()
	return buf
}
