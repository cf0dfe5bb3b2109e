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
	// two answers at most floor(R/Share) of the R that remained. Zero
	// means 1.
	Share int
	// Interval is the sync interval, µs; the processes' rounds are spread
	// evenly over it. Must be > 0.
	Interval int64
	// Latency is the time from a flush to its answer, µs, >= 0.
	Latency int64
	// FirstSight is edge.AsyncOptions.FirstSight: a process without a
	// view of the source admits up to this many requests locally, sent at
	// its next round. Zero: its first request asks the store.
	FirstSight int64
}

// AsyncReport is the enforcing-mode worst window of an async fleet: over
// the sources whose offered requests exceed Rate in some window, the most
// requests the fleet admitted in any window, in units of Rate; and its
// false denials: requests denied while the exact count of what the fleet
// admitted in the window before them was under Rate (as Result's
// WronglyDenied in enforcing mode), out of Requests, every source's.
type AsyncReport struct {
	Sources      int
	Mean, Max    float64
	FalseDenials int64
	Requests     int64
}

// RunAsync replays every source of w through a fleet of o.Processes
// asynchronous limiters over one exact sliding-window store (so that the
// excess is the async mode's alone), and reports the worst windows and
// the false denials. The model follows edge.Async: a process without a
// view asks the store synchronously (or, with FirstSight, admits up to it
// locally); it admits a request if its unsent cost plus one fits in
// floor(R/Share); it sends its unsent cost every Interval (and at once when
// that cost reaches half its budget), the store records what fits when the
// flush arrives, Latency later, and the answer is the new view (zero if
// the store refused part of the cost). A request that does not fit is
// denied locally while the store's last denial stands; otherwise the
// process sends what it owes and asks the store (both answered at once in
// the model: the caller waits for them).
func RunAsync(ctx context.Context, w Workload, p algo.Params, o AsyncOptions) (AsyncReport, error) {
	if o.Processes <= 0 || o.Interval <= 0 || o.Latency < 0 || o.FirstSight < 0 || p.Rate <= 0 || p.Window <= 0 {
		return AsyncReport{}, fmt.Errorf("sim: async: want Processes and Interval > 0, Latency and FirstSight >= 0 and a valid limit")
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
		rep.Requests += int64(len(buf))
		if len(buf) == 0 || worstWindow(buf, p.Window) <= p.Rate {
			continue // never over the limit: the store never denies, nor the fleet
		}
		admitted = f.replay(buf, admitted[:0])
		rep.FalseDenials += f.falseDenials
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
	viewed, blind     bool
	remaining         int64 // the view
	deniedUntil       int64 // the store's last denial stands until then, µs
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
	// adm is the exact log of what the fleet admitted, for false denials.
	adm          exact
	falseDenials int64
}

func newFleet(p algo.Params, o AsyncOptions) *fleet {
	return &fleet{p: p, o: o, share: int64(max(1, o.Share)), procs: make([]asyncProc, o.Processes)}
}

func (f *fleet) budget(pr *asyncProc) int64 {
	if pr.blind {
		return pr.remaining
	}
	return pr.remaining / f.share
}

// replay runs one source's requests through the fleet and appends the
// admitted instants to out.
func (f *fleet) replay(at, out []int64) []int64 {
	f.store.reset()
	f.adm.reset()
	f.falseDenials = 0
	for k := range f.procs {
		f.procs[k] = asyncProc{next: at[0] + int64(k)*f.o.Interval/int64(len(f.procs)), answerAt: -1}
	}
	for j, t := range at {
		f.advance(t)
		if f.decide(&f.procs[j%len(f.procs)], t) {
			out = append(out, t)
			f.adm.add(t)
		} else if f.adm.count(t, f.p.Window)+1 <= f.p.Rate {
			f.falseDenials++
		}
	}
	return out
}

// decide decides one request at t on process pr.
func (f *fleet) decide(pr *asyncProc, t int64) bool {
	if !pr.viewed && f.o.FirstSight > 0 {
		pr.viewed, pr.blind, pr.remaining = true, true, min(f.o.FirstSight, f.p.Rate)
	}
	if !pr.viewed {
		return f.ask(pr, t)
	}
	if pr.pending+pr.inflight+1 <= f.budget(pr) {
		f.owe(pr, t)
		if !pr.blind && 2*(pr.pending+pr.inflight) >= f.budget(pr) && pr.answerAt < 0 {
			pr.next = t // urgent: a round now
			f.advance(t)
		}
		return true
	}
	if t < pr.deniedUntil {
		return false // the store's denial stands
	}
	f.settle(pr, t)
	if pr.pending+pr.inflight+1 <= f.budget(pr) { // the answer made room
		f.owe(pr, t)
		return true
	}
	return f.ask(pr, t)
}

// owe adds a request admitted at t to what pr owes. Its round is not
// earlier than t: the store records in time order.
func (f *fleet) owe(pr *asyncProc, t int64) {
	if pr.pending == 0 {
		pr.next = max(pr.next, t)
	}
	pr.pending++
}

// settle sends what pr owes and takes the answers, at t.
func (f *fleet) settle(pr *asyncProc, t int64) {
	if pr.pending > 0 && pr.answerAt < 0 {
		pr.next = t
		f.advance(t)
	}
	if pr.answerAt >= 0 {
		pr.answerAt = t
		f.advance(t)
	}
}

// ask decides the request at t by the store, whose answer is pr's view.
func (f *fleet) ask(pr *asyncProc, t int64) bool {
	n := f.store.count(t, f.p.Window)
	pr.viewed, pr.blind, pr.deniedUntil = true, false, 0
	if n+1 <= f.p.Rate {
		f.store.add(t)
		pr.remaining = f.p.Rate - n - 1
		return true
	}
	pr.remaining = 0
	// It passes once the oldest n-Rate+1 recorded have left the window.
	pr.deniedUntil = f.store.at[f.store.head+int(n-f.p.Rate)] + f.p.Window
	return false
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
			if pr.answerAt < 0 && pr.pending > 0 && pr.next < at {
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
		pr.remaining, pr.blind, pr.deniedUntil = f.p.Rate-n-took, false, 0
		if took < pr.inflight {
			pr.remaining = 0
		}
		pr.inflight, pr.answerAt = 0, -1
	}
}
