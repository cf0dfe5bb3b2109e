package algo

import (
	mrand "math/rand/v2"
	"slices"
	"testing"
)

// refLog is a plain reference log: one Event of 16 bytes per instant, no
// packing into words. TestLogIsRefLog holds Log to it.

// Log is the exact sliding log: every recorded event with its cost, oldest
// first. Used is the sum of the costs of the events in (now − W, now].
// Events recorded at the same microsecond share one entry, so a log holds at
// most Rate entries plus those a shadow limit records beyond it.
type refLog struct {
	Events []Event
	// sum is the total cost of Events, kept by every method that changes
	// them, so that the usage takes the costs of the events that have left
	// the window off it instead of adding up the live ones.
	sum int64
}

// live returns the index of the oldest event still inside the window and
// the sum of the costs from there on. Events are ordered by At, so the
// live ones follow the ones that have left: it walks only the latter.
func (s *refLog) live(p Params, now int64) (first int, used int64) {
	used = s.sum
	for first < len(s.Events) && s.Events[first].At <= now-p.Window {
		used -= s.Events[first].Cost
		first++
	}
	return first, used
}

// Eval implements State.
func (s *refLog) Eval(p Params, now, cost int64) Result {
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
func (s *refLog) retryAfter(p Params, now int64, first int, used, cost int64) int64 {
	for _, ev := range s.Events[first:] {
		used -= ev.Cost
		if used+cost <= p.Rate {
			return ev.At + p.Window - now
		}
	}
	return 0
}

func (s *refLog) resetAfter(p Params, now int64) int64 {
	if len(s.Events) == 0 {
		return 0
	}
	return max(0, s.Events[len(s.Events)-1].At+p.Window-now)
}

// Record implements State. It drops the events that have left the window.
func (s *refLog) Record(p Params, now, cost int64) (float64, int64) {
	first, used := s.live(p, now)
	s.add(now, first, used, cost)
	return float64(used + cost), s.resetAfter(p, now)
}

// add records cost at now, first dropping the events before first (those
// that have left the window), whose costs from first on sum to used.
func (s *refLog) add(now int64, first int, used, cost int64) {
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
func (s *refLog) Check(p Params, now, cost int64, shadow bool) Outcome {
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

// Refund is Log.Refund as it was.
func (s *refLog) Refund(p Params, at, cost int64) {
	n := len(s.Events)
	if n == 0 || s.Events[n-1].At < at {
		return
	}
	if c := s.Events[n-1].Cost; c <= cost {
		s.sum -= c
		s.Events = s.Events[:n-1]
	} else {
		s.sum -= cost
		s.Events[n-1].Cost = c - cost
	}
}

// TestLogIsRefLog holds the chunked log to refLog, the log of 16-byte
// events it replaced: on random records, fused checks (shadow or not),
// evaluations and refunds, with clocks forward, still and back, windows
// up to sluice.MaxWindow (past what a packed word spans, so chunks end
// early), costs up to 2^21 (past what a word's cost holds, so chunks turn
// wide) and logs that empty and start again, every answer and every event
// must be the same, and the one-event form, dense, packed and wide
// chunks, chains of chunks and kept free chunks must all have been met.
func TestLogIsRefLog(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(61, 62))
	forms := map[string]int{}
	for run := range 2000 {
		p := Params{Rate: 1 + rng.Int64N(60), Window: 1 + rng.Int64N(10_000_000)}
		switch run % 5 {
		case 0:
			p.Window = 1 + rng.Int64N(int64(36500*24*3600)*1_000_000) // up to MaxWindow
		case 1:
			p.Rate = 1 << 22 // costs beyond a packed word's
		case 2:
			p.Window = 1<<44 - 1 + rng.Int64N(4) // at a packed word's span
		}
		step := p.Window/10 + 1
		if run%5 == 3 {
			p.Rate, step = 100+rng.Int64N(200), p.Window/60+1 // logs of several dense chunks
		}
		var s Log
		var ref refLog
		now := int64(1_700_000_000_000_000) + rng.Int64N(1<<40)
		ops := 300
		if run%5 == 3 {
			ops = 1500 // windows come and go
		}
		for i := range ops {
			switch rng.IntN(12) {
			case 0:
				now -= rng.Int64N(p.Window)
			case 1, 2:
			case 3:
				if run%5 != 3 || rng.IntN(10) == 0 {
					now += p.Window + rng.Int64N(p.Window) // everything leaves
				}
			default:
				now += rng.Int64N(step)
			}
			if s.WantsChunk() && rng.IntN(2) == 0 {
				s.Spare(NewLogChunk()) // as memstore's recording without the shard's lock
				if s.WantsChunk() || s.meta&freeBit == 0 {
					t.Fatalf("run %d op %d: Spare left %+v wanting a chunk", run, i, s)
				}
			}
			cost := 1 + rng.Int64N(3)
			if p.Rate > 1<<20 && rng.IntN(3) == 0 {
				cost = 1<<20 + rng.Int64N(1<<20)
			}
			var got, want any
			switch rng.IntN(5) {
			case 0:
				got, want = s.Eval(p, now, cost), ref.Eval(p, now, cost)
			case 1:
				u1, r1 := s.Record(p, now, cost)
				u2, r2 := ref.Record(p, now, cost)
				got, want = [2]any{u1, r1}, [2]any{u2, r2}
			case 2:
				at, back := now-rng.Int64N(3), cost+rng.Int64N(3)-1
				s.Refund(p, at, back)
				ref.Refund(p, at, back)
			default:
				shadow := rng.IntN(3) == 0
				got, want = s.Check(p, now, cost, shadow), ref.Check(p, now, cost, shadow)
			}
			if got != want || s.sum != ref.sum || !slices.Equal(s.Events(), ref.Events) {
				t.Fatalf("run %d op %d (%+v, now %d, cost %d): %+v, want %+v; events %+v sum %d, want %+v sum %d",
					run, i, p, now, cost, got, want, s.Events(), s.sum, ref.Events, ref.sum)
			}
			switch {
			case s.tail == nil:
			case s.tail == &oneEvent:
				forms["one"]++
			default:
				form := "packed"
				if s.wide() {
					form = "wide"
				} else if s.dense() {
					form = "dense"
				}
				forms[form]++
				if s.head() != s.tail {
					forms["chained"]++
					forms[form+" chained"]++
				}
				if s.meta&freeBit != 0 {
					forms["spare"]++
					forms[form+" spare"]++
				}
			}
		}
	}
	if forms["one"] < 100 || forms["wide"] < 100 || forms["packed"] < 100 || forms["dense"] < 100 || forms["chained"] < 100 ||
		forms["spare"] < 100 || forms["packed chained"] < 100 || forms["dense chained"] < 100 || forms["dense spare"] < 100 {
		t.Fatalf("forms met: %v: too few of one to test it", forms)
	}
}

// TestLogEvalAnyChunks: Eval reads a log's chunks in place, so chunks
// holding anything at all, linked in any way (as memstore's peek may read
// them while another check changes them, before it discards the result),
// never make it index past a chunk, panic or walk without end. Chains
// that never reach the tail are walked up to maxLogChunks links: cycles
// are made only in a few logs, as each takes that many steps.
func TestLogEvalAnyChunks(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(71, 72))
	for i := range 20_000 {
		chunks := make([]*logChunk, 1+rng.IntN(5))
		for j := range chunks {
			c := &logChunk{}
			for k := range c.w {
				c.w[k] = rng.Uint64()
			}
			chunks[j] = c
		}
		for j, c := range chunks {
			switch {
			case j+1 < len(chunks):
				c.next = chunks[j+1]
			case i%2000 == 0:
				c.next = chunks[len(chunks)-1] // a cycle the tail may not be on
			case i%2 == 0:
				c.next = nil
			default:
				c.next = chunks[0] // a ring
			}
		}
		s := Log{tail: chunks[rng.IntN(len(chunks))], sum: rng.Int64(), oldest: rng.Int64(), meta: rng.Uint64()}
		switch rng.IntN(8) {
		case 0:
			s.tail = &logChunk{} // a tail the chain never reaches
		case 1:
			s.tail = &oneEvent
		}
		s.Eval(Params{Rate: 1 + rng.Int64N(100), Window: 1 + rng.Int64N(1<<40)}, rng.Int64(), rng.Int64N(10))
	}
}

// TestLogRefundEmptiesChunks refunds a log's events one by one, newest
// first, across its chunks (the tail chunk emptying moves the tail back
// and keeps one free chunk), after older events have left (so a free chunk
// is kept already), checking the events against refLog at every step.
func TestLogRefundEmptiesChunks(t *testing.T) {
	for _, form := range []struct {
		name           string
		cost, perChunk int64
	}{{"dense", 1, chunkSlots}, {"packed", 1000, chunkWords}, {"wide", 1 << 21, chunkWords / 2}} {
		wide := form.name
		cost, perChunk := form.cost, int(form.perChunk)
		p := Params{Rate: 1 << 30, Window: 70 * form.perChunk} // holds 5 chunks' events, 10 µs apart
		var s Log
		var ref refLog
		now := int64(1_000_000)
		for range 5*perChunk - 1 {
			now += 10
			s.Record(p, now, cost)
			ref.Record(p, now, cost)
		}
		now = 1_000_000 + p.Window + 10*int64(perChunk) + 5 // the oldest chunk's events leave
		s.Record(p, now, cost)
		ref.Record(p, now, cost)
		if s.meta&freeBit == 0 {
			t.Fatalf("%s: no free chunk after the first left", wide)
		}
		for n := len(ref.Events); n > 0; n-- {
			at := ref.Events[n-1].At
			s.Refund(p, at, cost)
			ref.Refund(p, at, cost)
			if s.sum != ref.sum || !slices.Equal(s.Events(), ref.Events) {
				t.Fatalf("%s, %d events left: %+v sum %d, want %+v sum %d", wide, n-1, s.Events(), s.sum, ref.Events, ref.sum)
			}
			if r, want := s.Eval(p, now, 1), ref.Eval(p, now, 1); r != want {
				t.Fatalf("%s, %d events left: Eval %+v, want %+v", wide, n-1, r, want)
			}
		}
		if s != (Log{}) {
			t.Fatalf("%s: emptied log %+v, want the zero Log", wide, s)
		}
	}
}
