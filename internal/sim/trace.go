package sim

import (
	"fmt"
	"math"
	"slices"
)

// Class is the traffic pattern of a source in a generated Trace.
type Class uint8

// The classes, in the order their sources are numbered: the special classes
// first, then the background.
const (
	// SteadyUnder sources send at a regular pace, each at a fixed
	// 80–99% of the threshold, for a session: clients that poll just under
	// the limit and should never be limited.
	SteadyUnder Class = iota
	// SteadyOver sources send at a regular pace, each at a fixed 101–125% of
	// the threshold: clients just over the limit, which should be limited.
	SteadyOver
	// Bursty sources send a few bursts, each of 30–250% of the threshold
	// within 5–100% of a window, separated by silence.
	Bursty
	// Background sources have heavy-tailed sizes (Pareto, shape 1.2) and
	// Poisson arrivals over a session of random, log-uniform length.
	Background
	numClasses
)

var classNames = [numClasses]string{"steady-under", "steady-over", "bursty", "background"}

// String returns the class's name, such as "steady-under".
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

const (
	paretoShape = 1.2    // of background sizes: a heavy tail
	paretoMax   = 1000.0 // truncation of the Pareto weights (minimum 1)
)

// MaxSources is the largest number of sources of a Trace: planning keeps
// about 32 bytes per source (320 MB at the bound) while it allocates the
// background's requests.
const MaxSources = 10_000_000

// TraceOptions describe a generated trace. All fields but Profile are
// required.
type TraceOptions struct {
	Seed     uint64 // the same seed gives the same trace
	Requests int64  // total requests, exactly
	Sources  int    // number of sources, at least one per Class
	Duration int64  // µs; every request falls in [0, Duration)
	Rate     int64  // the threshold the trace is shaped around, per Window
	Window   int64  // µs
	// Profile is the mix of traffic classes, Harsh or Cloudflare.
	// Default Harsh.
	Profile string
}

// Trace is a generated, seeded workload: Sources sources whose requests
// add up to exactly Requests. It stores one count per source and generates
// a source's requests on demand, so its memory does not grow with Requests.
// A Trace is safe for concurrent use.
type Trace struct {
	o     TraceOptions
	p     profile
	first [numClasses + 1]int // sources of class c are first[c] ≤ i < first[c+1]
	sizes []int64             // requests of each source
}

var _ Workload = (*Trace)(nil)

// NewTrace plans the trace: the class and the number of requests of every
// source. It fails when the options cannot make a trace, such as fewer
// requests than the sources need.
func NewTrace(o TraceOptions) (*Trace, error) {
	switch {
	case o.Rate <= 0 || o.Window <= 0:
		return nil, fmt.Errorf("sim: trace: threshold %d per %d µs must be positive", o.Rate, o.Window)
	case o.Duration < o.Window:
		return nil, fmt.Errorf("sim: trace: duration %d µs is shorter than the window %d µs", o.Duration, o.Window)
	case o.Sources < int(numClasses) || o.Sources > MaxSources:
		return nil, fmt.Errorf("sim: trace: %d sources, want %d (one per traffic class) to %d", o.Sources, numClasses, MaxSources)
	}
	p, err := profileOf(o.Profile)
	if err != nil {
		return nil, err
	}
	if o.Profile == "" {
		o.Profile = Harsh
	}
	t := &Trace{o: o, p: p, sizes: make([]int64, o.Sources)}
	for c := range numClasses {
		n := 0
		if c != Background {
			n = max(1, int(p.sourceShare[c]*float64(o.Sources)))
		}
		t.first[c+1] = t.first[c] + n
	}
	t.first[numClasses] = o.Sources
	special := int64(0)
	for i := range t.first[Background] {
		r := newRNG(o.Seed, uint64(i))
		t.sizes[i] = t.plan(&r, i).n
		special += t.sizes[i]
	}
	rest, bg := o.Requests-special, int64(o.Sources-t.first[Background])
	if rest < bg {
		return nil, fmt.Errorf("sim: trace: %d requests are too few for %d sources (want at least %d)",
			o.Requests, o.Sources, special+bg)
	}
	if most := t.backgroundCap() * bg; rest > most {
		return nil, fmt.Errorf("sim: trace: %d requests are too many for the %s profile: its %d background sources may send at most %d",
			o.Requests, o.Profile, bg, most)
	}
	t.allocate(rest)
	return t, nil
}

// backgroundCap returns the most requests a background source may send:
// backgroundMax thresholds per window over the whole duration, at least 1.
func (t *Trace) backgroundCap() int64 {
	return max(1, int64(t.p.backgroundMax*float64(t.o.Rate)*float64(t.o.Duration)/float64(t.o.Window)))
}

// allocate splits rest requests over the background sources in proportion
// to truncated Pareto weights, at least one each and at most
// backgroundCap each, by largest remainder so that they add up exactly.
// Sources whose share would pass the cap get the cap, and the others share
// the rest, until none passes it.
func (t *Trace) allocate(rest int64) {
	lo, most := t.first[Background], t.backgroundCap()
	w := make([]float64, t.o.Sources-lo)
	for k := range w {
		r := newRNG(t.o.Seed, uint64(lo+k))
		w[k] = min(r.pareto(paretoShape), paretoMax)
	}
	capped := make([]bool, len(w))
	extra, sum := t.capLargest(w, capped, rest, most)
	frac := make([]float64, len(w))
	given := int64(0)
	for k := range w {
		if capped[k] {
			t.sizes[lo+k], frac[k] = most, -1
			given += most
			continue
		}
		share := float64(extra) * w[k] / sum
		t.sizes[lo+k] = 1 + int64(share)
		frac[k] = share - math.Floor(share)
		given += t.sizes[lo+k]
	}
	order := make([]int, len(w))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return -cmpFloat(frac[a], frac[b]) })
	for k := 0; given < rest; k++ {
		t.sizes[lo+order[k%len(order)]]++
		given++
	}
}

// capLargest marks in capped the sources whose proportional share of rest
// would pass most, repeatedly, and returns what the others share beyond
// their one request each and the sum of their weights.
func (t *Trace) capLargest(w []float64, capped []bool, rest, most int64) (extra int64, sum float64) {
	for {
		sum, extra = 0, rest
		for k := range w {
			if capped[k] {
				extra -= most
			} else {
				sum += w[k]
				extra--
			}
		}
		more := false
		for k := range w {
			if !capped[k] && 1+float64(extra)*w[k]/sum > float64(most) {
				capped[k], more = true, true
			}
		}
		if !more {
			return extra, sum
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Sources implements Workload.
func (t *Trace) Sources() int { return t.o.Sources }

// Profile returns the name of the trace's profile.
func (t *Trace) Profile() string { return t.o.Profile }

// Size returns the number of requests of source i.
func (t *Trace) Size(i int) int64 { return t.sizes[i] }

// Class returns the traffic class of source i.
func (t *Trace) Class(i int) Class {
	c := Class(0)
	for i >= t.first[c+1] {
		c++
	}
	return c
}

// Factor returns the rate of a steady source as a fraction of the
// threshold, and 0 for the other classes.
func (t *Trace) Factor(i int) float64 {
	if c := t.Class(i); c != SteadyUnder && c != SteadyOver {
		return 0
	}
	r := newRNG(t.o.Seed, uint64(i))
	return t.plan(&r, i).factor
}

// Representative returns one source of each class, the one with the most
// requests among the first few of its class: long enough to plot.
func (t *Trace) Representative() [numClasses]int {
	var out [numClasses]int
	for c := range numClasses {
		best := t.first[c]
		for i := t.first[c]; i < t.first[c+1] && i < t.first[c]+20; i++ {
			if t.sizes[i] > t.sizes[best] {
				best = i
			}
		}
		out[c] = best
	}
	return out
}
