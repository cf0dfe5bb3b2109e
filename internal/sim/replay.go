package sim

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/ident"
)

// exact is the reference: the instants of the requests counted in the
// sliding window, as integers, so the count has no rounding at all.
type exact struct {
	at   []int64
	head int // at[head:] are inside the window
}

// count returns the number of counted requests in (now − w, now].
func (e *exact) count(now, w int64) int64 {
	for e.head < len(e.at) && e.at[e.head] <= now-w {
		e.head++
	}
	if e.head > 1024 && e.head*2 > len(e.at) {
		e.at = e.at[:copy(e.at, e.at[e.head:])]
		e.head = 0
	}
	return int64(len(e.at) - e.head)
}

func (e *exact) add(now int64) { e.at = append(e.at, now) }

func (e *exact) reset() { e.at, e.head = e.at[:0], 0 }

// tally is one algorithm's counts over some sources.
type tally struct {
	sources           int
	requests          int64
	limited           int64 // requests the algorithm limits
	exactLimited      int64 // requests the exact reference limits
	wronglyAllowed    int64
	wronglyDenied     int64
	diff              sum // Σ |estimate − real| / real
	sourcesLimited    int64
	sourcesOver       int64
	falselyLimited    int64
	falselyLetThrough int64
	worstMiss         int64 // highest real count of a source falsely let through
	modelWrong        int64 // verdicts that differ from the algorithm's own model's
	modelDiff         sum   // Σ |usage − model's usage| / (model's usage + 1)
	overSources       int64 // enforcing: sources whose offered requests exceed Rate in some window
	worstSum          int64 // enforcing: Σ over those sources of the worst window admitted
	worstMax          int64 // enforcing: the largest of them
}

func (t *tally) add(o *tally) {
	t.sources += o.sources
	t.requests += o.requests
	t.limited += o.limited
	t.exactLimited += o.exactLimited
	t.wronglyAllowed += o.wronglyAllowed
	t.wronglyDenied += o.wronglyDenied
	t.diff.add(o.diff.value())
	t.sourcesLimited += o.sourcesLimited
	t.sourcesOver += o.sourcesOver
	t.falselyLimited += o.falselyLimited
	t.falselyLetThrough += o.falselyLetThrough
	t.worstMiss = max(t.worstMiss, o.worstMiss)
	t.modelWrong += o.modelWrong
	t.modelDiff.add(o.modelDiff.value())
	t.overSources += o.overSources
	t.worstSum += o.worstSum
	t.worstMax = max(t.worstMax, o.worstMax)
}

// sum is a Neumaier-compensated float64 sum: ten million relative
// differences add up without drift.
type sum struct{ s, c float64 }

func (s *sum) add(x float64) {
	t := s.s + x
	if abs(s.s) >= abs(x) {
		s.c += (s.s - t) + x
	} else {
		s.c += (x - t) + s.s
	}
	s.s = t
}

func (s *sum) value() float64 { return s.s + s.c }

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// replayer runs one source's requests through every algorithm and the
// reference. One replayer per worker; it reuses its buffers across sources.
type replayer struct {
	p        algo.Params
	names    []string
	enforce  bool
	states   []algo.State
	models   []model      // per algorithm; nil where the model is the exact window
	refs     []exact      // per algorithm, then the shared one: see ref
	algos    []ident.Algo // per algorithm: its entry in the table
	admitted [][]int64    // enforcing: per algorithm, the instants it admitted
	limited  []bool       // per algorithm: limited some request of this source
	over     []bool       // per reference: really over at some request
	peak     []int64      // per reference: highest real count
}

func newReplayer(p algo.Params, names []string, enforce bool) (*replayer, error) {
	nref := len(names) + 1
	r := &replayer{p: p, names: names, enforce: enforce, states: make([]algo.State, len(names)), algos: make([]ident.Algo, len(names)),
		models: make([]model, len(names)), refs: make([]exact, nref), admitted: make([][]int64, len(names)),
		limited: make([]bool, len(names)), over: make([]bool, nref), peak: make([]int64, nref)}
	for k, name := range names {
		a, ok := ident.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("sim: unknown algorithm %q (want one of %s)", name, strings.Join(Algorithms(), ", "))
		}
		r.algos[k] = a
		r.models[k] = newModel(name, p)
	}
	return r, nil
}

// Point is one instant of a watched source, replayed in shadow mode: a
// request or a sample between requests. Both Real and Estimate are the
// usage just after the instant: at a request they count the request
// itself (Used + 1); at a sample they are the usage then.
type Point struct {
	At       int64     // µs
	Real     int64     // requests in (At − Window, At], exactly
	Estimate []float64 // per algorithm, in the order of Options.Algorithms
}

// maxSamples bounds the samples of one watched source.
const maxSamples = 20_000

// source replays the requests at (ascending) into out, one tally per
// algorithm. When watch is set it also returns the points: every request,
// plus samples every W/120 from the first request to two windows after the
// last, when every algorithm has forgotten the source.
func (r *replayer) source(at []int64, out []tally, watch bool) []Point {
	for k := range r.names {
		r.states[k], r.limited[k], r.admitted[k] = r.algos[k].New(), false, r.admitted[k][:0]
		if m := r.models[k]; m != nil {
			m.reset()
		}
	}
	for k := range r.refs {
		r.refs[k].reset()
		r.over[k], r.peak[k] = false, 0
	}
	if len(at) == 0 {
		return nil
	}
	var points []Point
	end := at[len(at)-1] + 2*r.p.Window
	step := max(1, r.p.Window/120, (end-at[0])/maxSamples)
	next := at[0] + step
	for _, now := range at {
		var pt *Point
		if watch {
			for ; next < now; next += step {
				points = append(points, r.sample(next))
			}
			points = append(points, Point{At: now, Estimate: make([]float64, len(r.names))})
			pt = &points[len(points)-1]
		}
		r.request(now, out, pt)
	}
	for ; watch && next <= end; next += step {
		points = append(points, r.sample(next))
	}
	r.closeSource(out, worstWindow(at, r.p.Window))
	return points
}

// sample returns the usage at now, between requests, in shadow mode.
func (r *replayer) sample(now int64) Point {
	pt := Point{At: now, Real: r.refs[len(r.names)].count(now, r.p.Window), Estimate: make([]float64, len(r.names))}
	for k, s := range r.states {
		pt.Estimate[k] = s.Eval(r.p, now, 0).Used
	}
	return pt
}

// request decides one request at now with every algorithm and compares
// each verdict and estimate with the reference's and with the algorithm's
// own model.
func (r *replayer) request(now int64, out []tally, pt *Point) {
	shared := len(r.names)
	all := r.realRate(shared, now)
	if pt != nil {
		pt.Real = all
	}
	for k, s := range r.states {
		real := all
		if ref := r.ref(k); ref != shared {
			real = r.realRate(ref, now)
		}
		res := s.Eval(r.p, now, 1)
		out[k].observe(real, res, r.p.Rate)
		r.observeModel(k, now, real, res, &out[k])
		r.limited[k] = r.limited[k] || !res.Allowed
		if pt != nil {
			pt.Estimate[k] = res.Used + 1
		}
		if !res.Allowed && (r.enforce || !recordsDenied(r.names[k])) {
			continue // an enforcing limiter, or a GCRA in any mode, records nothing for a denial
		}
		s.Record(r.p, now, 1)
		if m := r.models[k]; m != nil {
			m.record(now)
		}
		if r.ref(k) != shared {
			r.refs[k].add(now)
		}
		if r.enforce {
			r.admitted[k] = append(r.admitted[k], now)
		}
	}
	r.refs[shared].add(now)
}

// ref returns the index in refs of algorithm k's exact reference, which
// counts the history that algorithm recorded: every request (the shared
// reference, last in refs) for a counting algorithm in shadow mode, what it
// admitted otherwise (its own, refs[k]).
func (r *replayer) ref(k int) int {
	if !r.enforce && recordsDenied(r.names[k]) {
		return len(r.names)
	}
	return k
}

// realRate returns reference ref's exact count at now, the request
// included, and notes whether the source is over the limit.
func (r *replayer) realRate(ref int, now int64) int64 {
	real := r.refs[ref].count(now, r.p.Window) + 1
	r.over[ref] = r.over[ref] || real > r.p.Rate
	r.peak[ref] = max(r.peak[ref], real)
	return real
}

// recordsDenied reports whether the named algorithm records, in shadow
// mode, a request it would deny. A counting algorithm in a measuring
// (shadow) limiter counts every request; a GCRA only ever advances its
// theoretical arrival time for a conforming request (a denied one is not
// scheduled), so it records only what it allows, in every mode.
func recordsDenied(algorithm string) bool { return algorithm != "gcra" }

// observeModel compares algorithm k's answer res at now with its own model:
// the exact window (whose count, the request included, is real) or the
// algorithm's model replayed on the same history.
func (r *replayer) observeModel(k int, now, real int64, res algo.Result, t *tally) {
	used, fits := float64(real-1), real <= r.p.Rate
	if m := r.models[k]; m != nil {
		used, fits = m.used(now), m.fits(now)
	}
	t.modelDiff.add(abs(res.Used-used) / (used + 1))
	if res.Allowed != fits {
		t.modelWrong++
	}
}

// observe counts one request: the algorithm's answer res against the real
// rate under the threshold rate.
func (t *tally) observe(real int64, res algo.Result, rate int64) {
	est, over := res.Used+1, real > rate
	t.requests++
	t.diff.add(abs(est-float64(real)) / float64(real))
	switch {
	case !res.Allowed && !over:
		t.wronglyDenied++
	case res.Allowed && over:
		t.wronglyAllowed++
	}
	if over {
		t.exactLimited++
	}
	if !res.Allowed {
		t.limited++
	}
}

// closeSource adds the source-level verdicts of the source just replayed,
// whose offered requests fill at most offered in any window. When
// enforcing, a source whose offered requests exceed Rate in some window is
// one the exact limit limits: for it, each algorithm's worst window of what
// it admitted counts.
func (r *replayer) closeSource(out []tally, offered int64) {
	for k := range r.names {
		ref := r.ref(k)
		t, over := &out[k], r.over[ref]
		t.sources++
		if r.limited[k] {
			t.sourcesLimited++
		}
		if over {
			t.sourcesOver++
		}
		switch {
		case r.limited[k] && !over:
			t.falselyLimited++
		case !r.limited[k] && over:
			t.falselyLetThrough++
			t.worstMiss = max(t.worstMiss, r.peak[ref])
		}
		if r.enforce && offered > r.p.Rate {
			worst := worstWindow(r.admitted[k], r.p.Window)
			t.overSources++
			t.worstSum += worst
			t.worstMax = max(t.worstMax, worst)
		}
	}
}
