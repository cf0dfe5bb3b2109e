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

// The mix of a trace: the share of sources and of requests in each special
// class. The background has the remaining sources and requests.
var (
	sourceShare  = [numClasses]float64{SteadyUnder: 0.02, SteadyOver: 0.02, Bursty: 0.02}
	requestShare = [numClasses]float64{SteadyUnder: 0.20, SteadyOver: 0.20, Bursty: 0.15}
)

const (
	paretoShape   = 1.2    // of background sizes: a heavy tail
	paretoMax     = 1000.0 // truncation of the Pareto weights (minimum 1)
	maxBackground = 50     // a background session is at most this many times the threshold on average
)

// MaxSources is the largest number of sources of a Trace: planning keeps
// about 32 bytes per source (320 MB at the bound) while it allocates the
// background's requests.
const MaxSources = 10_000_000

// TraceOptions describe a generated trace. All fields are required.
type TraceOptions struct {
	Seed     uint64 // the same seed gives the same trace
	Requests int64  // total requests, exactly
	Sources  int    // number of sources, at least one per Class
	Duration int64  // µs; every request falls in [0, Duration)
	Rate     int64  // the threshold the trace is shaped around, per Window
	Window   int64  // µs
}

// Trace is a generated, seeded workload: Sources sources whose requests
// add up to exactly Requests. It stores one count per source and generates
// a source's requests on demand, so its memory does not grow with Requests.
// A Trace is safe for concurrent use.
type Trace struct {
	o     TraceOptions
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
	t := &Trace{o: o, sizes: make([]int64, o.Sources)}
	for c := range numClasses {
		n := 0
		if c != Background {
			n = max(1, int(sourceShare[c]*float64(o.Sources)))
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
	t.allocate(rest)
	return t, nil
}

// allocate splits rest requests over the background sources in proportion
// to truncated Pareto weights, at least one each, by largest remainder so
// that they add up exactly.
func (t *Trace) allocate(rest int64) {
	lo := t.first[Background]
	w := make([]float64, t.o.Sources-lo)
	sum := 0.0
	for k := range w {
		r := newRNG(t.o.Seed, uint64(lo+k))
		w[k] = min(r.pareto(paretoShape), paretoMax)
		sum += w[k]
	}
	extra := rest - int64(len(w))
	frac := make([]float64, len(w))
	given := int64(0)
	for k := range w {
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
