package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Result is the outcome of one operation.
type Result uint8

// The results an Op reports.
const (
	// Allowed: the check was allowed (or, for a plain HTTP target, the
	// response was 2xx).
	Allowed Result = iota
	// Denied: the check was denied (HTTP 429).
	Denied
	// Failed: the operation returned an error; it is counted, not timed.
	Failed
)

// An Op performs one operation. seq numbers the worker's operations from
// 0. It returns Failed with a non-nil error when the operation could not
// complete. An Op belongs to one worker and is never called concurrently.
type Op func(ctx context.Context, seq uint64) (Result, error)

// Options configure Run. The zero value runs 64 workers for 10 seconds.
type Options struct {
	// Concurrency is the number of workers, each running its Op in a loop.
	// Default 64.
	Concurrency int
	// Duration bounds the run in time. Default 10s when Requests is zero;
	// no bound otherwise.
	Duration time.Duration
	// Requests bounds the run in operations, across all workers. Default
	// 0: no bound.
	Requests uint64
	// Progress, when set, is called every ProgressEvery with the totals so
	// far, from a goroutine of its own. Default nil.
	Progress func(Progress)
	// ProgressEvery is the interval between Progress calls. Default 500ms.
	ProgressEvery time.Duration
}

// Progress is a running total.
type Progress struct {
	Elapsed time.Duration
	Ops     uint64
	Errors  uint64
}

// Report is the outcome of a run.
type Report struct {
	Concurrency int
	Elapsed     time.Duration
	// Ops counts completed operations (allowed, denied and failed).
	Ops, Allowed, Denied, Errors uint64
	// FirstError is the first error an Op returned, if any.
	FirstError error
	// Latency holds the latency of every operation that did not fail.
	Latency *Histogram
}

// Rate returns completed operations per second.
func (r *Report) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// worker is one worker's tallies, padded so workers do not share cache
// lines.
type worker struct {
	ops     atomic.Uint64
	errors  atomic.Uint64
	allowed uint64
	denied  uint64
	hist    Histogram
	err     error
	_       [64]byte
}

// Run starts opts.Concurrency workers, each calling the Op newOp returns for
// it, until the duration or request bound is reached or ctx is done, and
// reports what they did. newOp is called for every worker before any
// starts; an error there stops Run.
func Run(ctx context.Context, opts Options, newOp func(worker int) (Op, error)) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ops := make([]Op, opts.Concurrency)
	for i := range ops {
		if ops[i], err = newOp(i); err != nil {
			return nil, fmt.Errorf("loadgen: worker %d: %w", i, err)
		}
	}
	if opts.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Duration)
		defer cancel()
	}
	workers := make([]worker, opts.Concurrency)
	var budget atomic.Int64
	budget.Store(int64(opts.Requests))
	start := time.Now()
	stopProgress := startProgress(opts, start, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { workers[i].loop(ctx, ops[i], opts.Requests > 0, &budget) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	return report(opts.Concurrency, elapsed, workers), nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Concurrency == 0 {
		o.Concurrency = 64
	}
	if o.Duration == 0 && o.Requests == 0 {
		o.Duration = 10 * time.Second
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = 500 * time.Millisecond
	}
	switch {
	case o.Concurrency < 0:
		return o, fmt.Errorf("loadgen: concurrency must be >= 1, got %d", o.Concurrency)
	case o.Duration < 0:
		return o, fmt.Errorf("loadgen: duration must be >= 0, got %v", o.Duration)
	case o.ProgressEvery < 0:
		return o, fmt.Errorf("loadgen: progress interval must be > 0, got %v", o.ProgressEvery)
	}
	return o, nil
}

func (w *worker) loop(ctx context.Context, op Op, bounded bool, budget *atomic.Int64) {
	for seq := uint64(0); ctx.Err() == nil; seq++ {
		if bounded && budget.Add(-1) < 0 {
			return
		}
		t0 := time.Now()
		res, err := op(ctx, seq)
		lat := time.Since(t0)
		if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return // cut short by the end of the run: not an operation
		}
		switch res {
		case Allowed:
			w.allowed++
			w.hist.Record(lat)
		case Denied:
			w.denied++
			w.hist.Record(lat)
		default:
			w.errors.Add(1)
			if w.err == nil {
				w.err = err
			}
		}
		w.ops.Add(1)
	}
}

func startProgress(opts Options, start time.Time, workers []worker) (stop func()) {
	if opts.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(opts.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				var p Progress
				for i := range workers {
					p.Ops += workers[i].ops.Load()
					p.Errors += workers[i].errors.Load()
				}
				p.Elapsed = time.Since(start)
				opts.Progress(p)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func report(concurrency int, elapsed time.Duration, workers []worker) *Report {
	r := &Report{Concurrency: concurrency, Elapsed: elapsed, Latency: new(Histogram)}
	for i := range workers {
		w := &workers[i]
		r.Ops += w.ops.Load()
		r.Errors += w.errors.Load()
		r.Allowed += w.allowed
		r.Denied += w.denied
		r.Latency.Merge(&w.hist)
		if r.FirstError == nil {
			r.FirstError = w.err
		}
	}
	return r
}
