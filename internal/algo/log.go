package algo

// Log is the exact sliding log: every recorded event with its cost, oldest
// first. Used is the sum of the costs of the events in (now − W, now].
// Events recorded at the same microsecond share one entry, so a log holds at
// most Rate entries plus those a shadow limit records beyond it.
type Log struct {
	Events []Event
	// sum is the total cost of Events, kept by every method that changes
	// them, so that the usage takes the costs of the events that have left
	// the window off it instead of adding up the live ones.
	sum int64
}

// Event is one recorded cost.
type Event struct {
	At   int64 // µs since the epoch
	Cost int64
}

// live returns the index of the oldest event still inside the window and
// the sum of the costs from there on. Events are ordered by At, so the
// live ones follow the ones that have left: it walks only the latter.
func (s *Log) live(p Params, now int64) (first int, used int64) {
	used = s.sum
	for first < len(s.Events) && s.Events[first].At <= now-p.Window {
		used -= s.Events[first].Cost
		first++
	}
	return first, used
}

// Eval implements State.
func (s *Log) Eval(p Params, now, cost int64) Result {
	first, used := s.live(p, now)
	r := Result{Used: float64(used), ResetAfter: s.resetAfter(p, now)}
	if r.Allowed = used+cost <= p.Rate; !r.Allowed {
		r.RetryAfter = s.retryAfter(p, now, first, used, cost)
	}
	return r
}

// retryAfter returns the µs until cost fits on the used cost of the events
// from first on. The cost fits once enough of the oldest events have left:
// event i leaves (now − W, now] when now reaches At + W.
func (s *Log) retryAfter(p Params, now int64, first int, used, cost int64) int64 {
	for _, ev := range s.Events[first:] {
		used -= ev.Cost
		if used+cost <= p.Rate {
			return ev.At + p.Window - now
		}
	}
	return 0
}

func (s *Log) resetAfter(p Params, now int64) int64 {
	if len(s.Events) == 0 {
		return 0
	}
	return max(0, s.Events[len(s.Events)-1].At+p.Window-now)
}

// Record implements State. It drops the events that have left the window.
func (s *Log) Record(p Params, now, cost int64) (float64, int64) {
	first, used := s.live(p, now)
	s.add(now, first, used, cost)
	return float64(used + cost), s.resetAfter(p, now)
}

// add records cost at now, first dropping the events before first (those
// that have left the window), whose costs from first on sum to used.
func (s *Log) add(now int64, first int, used, cost int64) {
	s.sum = used + cost
	if first > 0 { // else nothing has left: no copy of the log onto itself
		s.Events = append(s.Events[:0], s.Events[first:]...)
	}
	switch n := len(s.Events); {
	case n > 0 && s.Events[n-1].At == now:
		s.Events[n-1].Cost += cost
	case n > 0 && s.Events[n-1].At > now:
		// A clock behind the newest event: keep the log ordered by
		// recording at the newest instant, which leaves the window last.
		s.Events[n-1].Cost += cost
	default:
		s.Events = append(s.Events, Event{At: now, Cost: cost})
	}
}

// Check is Decide for one hit on s, fused: Eval, then Record when the hit
// is allowed (or shadow) and cost > 0, finding the live events once. The
// outcome and the state are those of Eval and Record
// (TestCheckIsEvalRecord).
func (s *Log) Check(p Params, now, cost int64, shadow bool) Outcome {
	first, used := s.live(p, now)
	o := Outcome{Allowed: used+cost <= p.Rate, Used: float64(used)}
	if !o.Allowed {
		o.RetryAfter = s.retryAfter(p, now, first, used, cost)
	}
	if (o.Allowed || shadow) && cost > 0 {
		s.add(now, first, used, cost)
		o.Used = float64(used + cost)
	}
	o.ResetAfter = s.resetAfter(p, now)
	return o
}
