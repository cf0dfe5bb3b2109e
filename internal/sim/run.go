package sim

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/ident"
)

// Workload is a set of independent sources of requests. Implementations
// must be safe for concurrent use: Run asks for several sources at once.
type Workload interface {
	// Sources returns the number of sources.
	Sources() int
	// Requests appends source i's request instants, in µs, ascending, to
	// buf and returns the extended slice.
	Requests(buf []int64, i int) []int64
}

// Algorithms returns the names of the five algorithms, the default first:
// what Run compares when Options.Algorithms is empty.
func Algorithms() []string {
	var names []string
	for _, a := range ident.Algos() {
		names = append(names, a.Name)
	}
	return names
}

// Options tune Run. The zero value compares every algorithm in shadow mode
// on every core.
type Options struct {
	// Algorithms to compare with the exact reference, by name (see
	// internal/ident's table). Default: Algorithms().
	Algorithms []string
	// Enforce replays in enforcing mode: a request an algorithm limits is
	// not recorded by it, and its reference counts only what it admitted.
	// Default false: shadow mode, where every request is recorded.
	Enforce bool
	// Workers is the number of goroutines replaying sources. Default
	// runtime.GOMAXPROCS(0).
	Workers int
	// Watch lists sources whose every request Run keeps as a Point (in
	// shadow mode, whatever Enforce says), for a plot. Default none.
	Watch []int
}

// chunk is the number of consecutive sources a worker takes at a time.
// Results are merged chunk by chunk in source order, so a report does not
// depend on the number of workers or their scheduling.
const chunk = 64

// Run replays every source of w through each algorithm under the limit p
// (Rate per Window, Bucket for the buckets algorithm) and compares it with
// the exact sliding log. Sources are independent: workers take them in
// chunks, and memory holds one source per worker at a time. It stops early
// when ctx is done, with ctx's error.
func Run(ctx context.Context, w Workload, p algo.Params, o Options) (*Report, error) {
	names := o.Algorithms
	if len(names) == 0 {
		names = Algorithms()
	}
	if err := validParams(p); err != nil {
		return nil, err
	}
	if _, err := newReplayer(p, names, false); err != nil {
		return nil, err
	}
	watch := make(map[int]int, len(o.Watch))
	for slot, i := range o.Watch {
		if i < 0 || i >= w.Sources() {
			return nil, fmt.Errorf("sim: watched source %d out of range [0, %d)", i, w.Sources())
		}
		watch[i] = slot
	}
	r := &run{w: w, p: p, names: names, enforce: o.Enforce, watch: watch,
		chunks: make([][]tally, (w.Sources()+chunk-1)/chunk), series: make([]Series, len(o.Watch))}
	if c, ok := w.(interface{ Class(i int) Class }); ok {
		r.classOf = c.Class
	}
	if err := r.start(ctx, o.Workers); err != nil {
		return nil, err
	}
	return r.report(), nil
}

func validParams(p algo.Params) error {
	switch {
	case p.Rate <= 0 || p.Window <= 0:
		return fmt.Errorf("sim: limit %d per %d µs: rate and window must be positive", p.Rate, p.Window)
	case p.Bucket <= 0 || p.Window%p.Bucket != 0:
		return fmt.Errorf("sim: bucket %d µs must be positive and divide the window %d µs", p.Bucket, p.Window)
	}
	return validModel(p.Rate, p.Window)
}

// run is one Run in progress.
type run struct {
	w       Workload
	p       algo.Params
	names   []string
	enforce bool
	watch   map[int]int // source → slot in series
	next    atomic.Int64
	classOf func(int) Class // nil when the workload has no classes
	chunks  [][]tally       // per chunk, per class × algorithm
	series  []Series        // per watched source; each written by one worker
}

func (r *run) start(ctx context.Context, workers int) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for k := range workers {
		wg.Go(func() { errs[k] = r.work(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// work replays chunks until none is left.
func (r *run) work(ctx context.Context) error {
	rp, _ := newReplayer(r.p, r.names, r.enforce)
	var shadow *replayer
	if r.enforce && len(r.watch) > 0 {
		shadow, _ = newReplayer(r.p, r.names, false)
	}
	var buf []int64
	for ctx.Err() == nil {
		c := int(r.next.Add(1) - 1)
		if c >= len(r.chunks) {
			return nil
		}
		out := make([]tally, int(numClasses)*len(r.names))
		for i := c * chunk; i < min(r.w.Sources(), (c+1)*chunk); i++ {
			class := Class(0)
			if r.classOf != nil {
				class = r.classOf(i)
			}
			into := out[int(class)*len(r.names):][:len(r.names)]
			buf = r.w.Requests(buf[:0], i)
			if !slices.IsSorted(buf) {
				return fmt.Errorf("sim: source %d: request instants are not in ascending order", i)
			}
			slot, watched := r.watch[i]
			points := rp.source(buf, into, watched && !r.enforce)
			if watched && r.enforce {
				points = shadow.source(buf, make([]tally, len(r.names)), true)
			}
			if watched {
				r.series[slot] = Series{Source: i, Points: points}
			}
		}
		r.chunks[c] = out
	}
	return ctx.Err()
}

// report merges the chunks in order, then the classes.
func (r *run) report() *Report {
	n := len(r.names)
	byClass := make([]tally, int(numClasses)*n)
	for _, c := range r.chunks {
		for k := range byClass {
			byClass[k].add(&c[k])
		}
	}
	total := make([]tally, n)
	for k := range byClass {
		total[k%n].add(&byClass[k])
	}
	mode := "shadow"
	if r.enforce {
		mode = "enforce"
	}
	rep := &Report{Mode: mode, Rate: r.p.Rate, Window: r.p.Window, Sources: r.w.Sources(),
		Requests: total[0].requests, Series: r.series, Results: r.results(total)}
	for c := range numClasses {
		if r.classOf == nil {
			break
		}
		t := byClass[int(c)*n:][:n]
		rep.Classes = append(rep.Classes, ClassReport{Class: c.String(), Sources: t[0].sources,
			Requests: t[0].requests, Results: r.results(t)})
	}
	return rep
}

func (r *run) results(t []tally) []Result {
	out := make([]Result, len(t))
	for k := range t {
		out[k] = t[k].result(r.names[k], r.p.Rate, r.enforce)
	}
	return out
}
