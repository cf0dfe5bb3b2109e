package algo

import "math"

// Log is the exact sliding log: every recorded event with its cost, oldest
// first. Used is the sum of the costs of the events in (now − W, now].
// Events recorded at the same microsecond share one entry, so a log holds at
// most Rate entries plus those a shadow limit records beyond it.
//
// The events are packed into words (see logWords): one 8-byte word per
// event, after one word of base time, as long as every event lies within
// about 203 days of the base and costs under 2^20; otherwise two words per
// event. The packing changes how the events are kept, never which: every
// method reads back the same instants and costs (TestLogIsRefLog).
type Log struct {
	ev logWords
	// sum is the total cost of the events, kept by every method that
	// changes them, so that the usage takes the costs of the events that
	// have left the window off it instead of adding up the live ones.
	sum int64
}

// Event is one recorded cost.
type Event struct {
	At   int64 // µs since the epoch
	Cost int64
}

// logWords holds a log's events, oldest first, in one of two forms told
// apart by the first word:
//
//   - packed: word 0 is a base instant (µs since the epoch), then one word
//     per event, its instant's distance from the base in the high
//     deltaBits bits and its cost in the low costBits bits;
//   - wide: word 0 is wideMark, then two words per event, its instant and
//     its cost.
//
// Empty, it has no words at all. A log starts packed and turns wide only
// when an event does not fit, even measured from its oldest event (a
// window over 2^44 µs, or one instant's cost of 2^20 or more); emptied,
// it starts packed again.
type logWords []uint64

const (
	costBits  = 20
	deltaBits = 64 - costBits
	costMask  = 1<<costBits - 1
	maxDelta  = 1<<deltaBits - 1
	wideMark  = uint64(1) << 63 // never a packed base: no event is at math.MinInt64 µs while packed
)

func (w logWords) wide() bool { return w[0] == wideMark }

// logView reads a log's events in the form it had when the view was
// taken: its indexes stay within the words whatever they hold later, so a
// reader without the store's lock (memstore's peek, which discards what
// it read if the state changed) can never index past them.
type logView struct {
	w    logWords
	wide bool
}

func (w logWords) view() logView {
	return logView{w: w, wide: len(w) > 0 && w.wide()}
}

// n returns the number of events.
func (v logView) n() int {
	switch {
	case len(v.w) == 0:
		return 0
	case v.wide:
		return (len(v.w) - 1) / 2
	}
	return len(v.w) - 1
}

// event returns event i (0 the oldest), i < n().
func (v logView) event(i int) (at, cost int64) {
	if v.wide {
		return int64(v.w[1+2*i]), int64(v.w[2+2*i])
	}
	x := v.w[1+i]
	return int64(v.w[0]) + int64(x>>costBits), int64(x & costMask)
}

// n and event are the view's, for a log read under its store's lock.
func (w logWords) n() int                       { return w.view().n() }
func (w logWords) event(i int) (at, cost int64) { return w.view().event(i) }

// live returns the index of the oldest event still inside the window and
// the sum of the costs from there on. Events are ordered by At, so the
// live ones follow the ones that have left: it walks only the latter.
func (s *Log) live(v logView, p Params, now int64) (first int, used int64) {
	used = s.sum
	for n := v.n(); first < n; first++ {
		at, c := v.event(first)
		if at > now-p.Window {
			break
		}
		used -= c
	}
	return first, used
}

// Eval implements State.
func (s *Log) Eval(p Params, now, cost int64) Result {
	v := s.ev.view()
	first, used := s.live(v, p, now)
	r := Result{Used: float64(used), ResetAfter: resetAfter(v, p, now)}
	if r.Allowed = used+cost <= p.Rate; !r.Allowed {
		r.RetryAfter = retryAfter(v, p, now, first, used, cost)
	}
	return r
}

// retryAfter returns the µs until cost fits on the used cost of the events
// from first on. The cost fits once enough of the oldest events have left:
// event i leaves (now − W, now] when now reaches At + W.
func retryAfter(v logView, p Params, now int64, first int, used, cost int64) int64 {
	for i, n := first, v.n(); i < n; i++ {
		at, c := v.event(i)
		used -= c
		if used+cost <= p.Rate {
			return at + p.Window - now
		}
	}
	return 0
}

func resetAfter(v logView, p Params, now int64) int64 {
	n := v.n()
	if n == 0 {
		return 0
	}
	at, _ := v.event(n - 1)
	return max(0, at+p.Window-now)
}

// Record implements State. It drops the events that have left the window.
func (s *Log) Record(p Params, now, cost int64) (float64, int64) {
	first, used := s.live(s.ev.view(), p, now)
	s.add(now, first, used, cost)
	return float64(used + cost), resetAfter(s.ev.view(), p, now)
}

// add records cost at now, first dropping the events before first (those
// that have left the window), whose costs from first on sum to used.
func (s *Log) add(now int64, first int, used, cost int64) {
	s.sum = used + cost
	if first > 0 { // else nothing has left: no copy of the log onto itself
		s.ev.drop(first)
	}
	n := s.ev.n()
	if n == 0 {
		s.ev.start(now, cost)
		return
	}
	// A clock behind the newest event (at > now): keep the log ordered by
	// recording at the newest instant, which leaves the window last.
	if at, c := s.ev.event(n - 1); at >= now {
		s.ev.setLast(at, c+cost)
		return
	}
	s.ev.push(now, cost)
}

// drop removes the k oldest events; all of them empties the log.
func (w *logWords) drop(k int) {
	v := *w
	if k == v.n() {
		*w = v[:0]
		return
	}
	if v.wide() {
		*w = append(v[:1], v[1+2*k:]...)
		return
	}
	*w = append(v[:1], v[1+k:]...)
}

// start records the first event of an empty log.
func (w *logWords) start(at, cost int64) {
	v := (*w)[:0]
	if at != math.MinInt64 && cost <= costMask {
		*w = append(v, uint64(at), uint64(cost))
		return
	}
	*w = append(v, wideMark, uint64(at), uint64(cost))
}

// push appends an event after the newest (at is later than it).
func (w *logWords) push(at, cost int64) {
	v := *w
	if !v.wide() {
		if v.fits(at, cost) || v.rebase() && v.fits(at, cost) {
			*w = append(v, uint64(at-int64(v[0]))<<costBits|uint64(cost))
			return
		}
		v = v.widen()
	}
	*w = append(v, uint64(at), uint64(cost))
}

// setLast sets the newest event's instant and cost.
func (w *logWords) setLast(at, cost int64) {
	v := *w
	if !v.wide() {
		if cost <= costMask {
			v[len(v)-1] = uint64(at-int64(v[0]))<<costBits | uint64(cost)
			return
		}
		v = v.widen()
		*w = v
	}
	v[len(v)-2], v[len(v)-1] = uint64(at), uint64(cost)
}

// fits reports whether a packed log can hold an event at or after its
// newest as a word.
func (w logWords) fits(at, cost int64) bool {
	return cost <= costMask && uint64(at-int64(w[0])) <= maxDelta
}

// rebase moves a packed log's base up to its oldest event, where the
// dropping of older events left it behind. It reports whether it moved.
func (w logWords) rebase() bool {
	d := w[1] >> costBits // the oldest event's distance from the base
	if d == 0 {
		return false
	}
	w[0] += d
	for i := 1; i < len(w); i++ {
		w[i] -= d << costBits
	}
	return true
}

// widen returns a packed log's events in the wide form, with room for one
// more.
func (w logWords) widen() logWords {
	n := w.n()
	v := make(logWords, 1, 3+2*n)
	v[0] = wideMark
	for i := range n {
		at, c := w.event(i)
		v = append(v, uint64(at), uint64(c))
	}
	return v
}

// Check is Decide for one hit on s, fused: Eval, then Record when the hit
// is allowed (or shadow) and cost > 0, finding the live events once. The
// outcome and the state are those of Eval and Record
// (TestCheckIsEvalRecord).
func (s *Log) Check(p Params, now, cost int64, shadow bool) Outcome {
	v := s.ev.view()
	first, used := s.live(v, p, now)
	o := Outcome{Allowed: used+cost <= p.Rate, Used: float64(used)}
	if !o.Allowed {
		o.RetryAfter = retryAfter(v, p, now, first, used, cost)
	}
	if (o.Allowed || shadow) && cost > 0 {
		s.add(now, first, used, cost)
		o.Used = float64(used + cost)
	}
	o.ResetAfter = resetAfter(s.ev.view(), p, now)
	return o
}

// Events returns a copy of the log's events, oldest first (tests and
// diagnostics: it allocates).
func (s *Log) Events() []Event {
	n := s.ev.n()
	out := make([]Event, n)
	for i := range out {
		out[i].At, out[i].Cost = s.ev.event(i)
	}
	return out
}
