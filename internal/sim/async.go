package sim

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/algo"
)

// AsyncOptions describe a fleet in sluice's asynchronous mode (package
// edge, edge.Async) for RunAsync.
type AsyncOptions struct {
	// Processes is the fleet's size N; a source's requests are spread over
	// the processes in turn, as by a round-robin balancer. Must be > 0.
	Processes int
	// Share is edge.AsyncOptions.Processes: each process admits between
	// two answers at most ceil(R/Share) of the R that remained. Zero
	// means 1.
	Share int
	// Interval is the sync interval, µs; the processes' rounds are spread
	// evenly over it. Must be > 0.
	Interval int64
	// Latency is the time from a flush to its answer, µs, >= 0.
	Latency int64
}

// AsyncReport is the enforcing-mode worst window of an async fleet: over
// the sources whose offered requests exceed Rate in some window, the most
// requests the fleet admitted in any window, in units of Rate.
type AsyncReport struct {
	Sources   int
	Mean, Max float64
}

// RunAsync replays every source of w through a fleet of o.Processes
// asynchronous limiters over one exact sliding-window store (so that the
// excess is the async mode's alone), and reports the worst windows. The
// model follows edge.Async: a process without a view asks the store
// synchronously; it admits a request if its unsent cost plus one fits in
// ceil(R/Share); it sends its unsent cost every Interval (and at once
// when that cost reaches half its budget), the store records what fits
// when the flush arrives, Latency later, and the answer is the new view
// (zero if the store refused part of the cost).
func RunAsync(ctx context.Context, w Workload, p algo.Params, o AsyncOptions) (AsyncReport, error) {
	if o.Processes <= 0 || o.Interval <= 0 || o.Latency < 0 || p.Rate <= 0 || p.Window <= 0 {
		return AsyncReport{}, fmt.Errorf("sim: async: want Processes and Interval > 0, Latency >= 0 and a valid limit")
	}
	var rep AsyncReport
	var sum float64
	var buf, admitted []int64
	f := newFleet(p, o)
	for i := range w.Sources() {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		buf = w.Requests(buf[:0], i)
		if len(buf) == 0 || worstWindow(buf, p.Window) <= p.Rate {
			continue
		}
		admitted = f.replay(buf, admitted[:0])
		ww := float64(worstWindow(admitted, p.Window)) / float64(p.Rate)
		rep.Sources++
		sum += ww
		rep.Max = max(rep.Max, ww)
	}
	if rep.Sources > 0 {
		rep.Mean = sum / float64(rep.Sources)
	}
	return rep, nil
}

// asyncProc is one process's state for one key.
type asyncProc struct {
	viewed            bool
	remaining         int64 // the view
	pending, inflight int64
	next              int64 // next round, µs
	answerAt          int64 // -1: no flush in flight
}

type fleet struct {
	p     algo.Params
	o     AsyncOptions
	share int64
	store exact
	procs []asyncProc
}

func newFleet(p algo.Params, o AsyncOptions) *fleet {
	return &fleet{p: p, o: o, share: int64(max(1, o.Share)), procs: make([]asyncProc, o.Processes)}
}

func (f *fleet) budget(pr *asyncProc) int64 { return (pr.remaining + f.share - 1) / f.share }

// replay runs one source's requests through the fleet and appends the
// admitted instants to out.
func (f *fleet) replay(at, out []int64) []int64 {
	f.store.reset()
	for k := range f.procs {
		f.procs[k] = asyncProc{next: at[0] + int64(k)*f.o.Interval/int64(len(f.procs)), answerAt: -1}
	}
	for j, t := range at {
		f.advance(t)
		pr := &f.procs[j%len(f.procs)]
		if !pr.viewed { // no view: the store decides, and answers
			n := f.store.count(t, f.p.Window)
			if n+1 <= f.p.Rate {
				f.store.add(t)
				out = append(out, t)
				n++
			}
			pr.viewed, pr.remaining = true, f.p.Rate-n
			continue
		}
		if pr.pending+pr.inflight+1 <= f.budget(pr) {
			pr.pending++
			out = append(out, t)
			if 2*(pr.pending+pr.inflight) >= f.budget(pr) && pr.answerAt < 0 {
				pr.next = t // urgent: a round now
				f.advance(t)
			}
		}
	}
	return out
}

// advance runs every flush and answer due by now, in time order.
func (f *fleet) advance(now int64) {
	for i := range f.procs {
		// An idle process's rounds only refresh its view: keep the last.
		if pr := &f.procs[i]; pr.pending == 0 && pr.answerAt < 0 && pr.next+f.o.Interval <= now {
			pr.next += (now - pr.next) / f.o.Interval * f.o.Interval
		}
	}
	for {
		k, at, answer := -1, now+1, false
		for i := range f.procs {
			pr := &f.procs[i]
			if pr.answerAt >= 0 && pr.answerAt < at {
				k, at, answer = i, pr.answerAt, true
			}
			if pr.answerAt < 0 && pr.next < at {
				k, at, answer = i, pr.next, false
			}
		}
		if k < 0 {
			return
		}
		pr := &f.procs[k]
		if !answer { // a round: send what is owed
			pr.inflight, pr.pending = pr.pending, 0
			pr.answerAt = at + f.o.Latency
			pr.next = at + f.o.Interval
			continue
		}
		// The flush arrives: the store records what fits, then answers.
		n := f.store.count(at, f.p.Window)
		took := min(pr.inflight, max(0, f.p.Rate-n))
		for range took {
			f.store.add(at)
		}
		pr.remaining = f.p.Rate - n - took
		if took < pr.inflight {
			pr.remaining = 0
		}
		pr.inflight, pr.answerAt = 0, -1
	}
}
