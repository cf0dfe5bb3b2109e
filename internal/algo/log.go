package algo

// Log is the exact sliding log: every recorded event with its cost, oldest
// first. Used is the sum of the costs of the events in (now − W, now].
// Events recorded at the same microsecond share one entry, so a log holds at
// most Rate entries plus those a shadow limit records beyond it.
//
// A log of one event keeps it in the Log itself (its instant in oldest, its
// cost in sum): no memory of its own. Longer logs keep their events in
// fixed-size chunks (logChunk), oldest first, linked from head to tail:
// one 8-byte word per event in a chunk of packed events, two in a wide
// chunk (an event whose cost does not fit a word, 2^20 or more, which only
// shadow limits reach). A log grows by linking a chunk, never by copying
// its events, and events that leave the window free their chunk, kept
// for the next one the log needs (tail.next), so a log whose events come
// and go at the same pace allocates nothing. The form changes how the
// events are kept, never which: every method reads back the same instants
// and costs (TestLogIsRefLog).
//
// A check on a log where nothing has left the window reads only the Log
// and its tail chunk: the oldest instant is kept in the Log, so the usage
// is sum unless an event has left.
type Log struct {
	head, tail *logChunk // nil when empty; head == &oneEvent when the log is its one event (tail nil)
	// sum is the total cost of the events, kept by every method that
	// changes them, so that the usage takes the costs of the events that
	// have left the window off it instead of adding up the live ones.
	sum    int64
	oldest int64 // the oldest event's instant, when there is one
}

// Event is one recorded cost.
type Event struct {
	At   int64 // µs since the epoch
	Cost int64
}

// logChunk holds events lo..hi-1 of a log in w, oldest first. Packed, each
// event is one word: its instant's distance from base in the high
// deltaBits bits and its cost in the low costBits bits. Wide, each event is
// two words: its instant and its cost. A chunk takes the form of its first
// event; the next event that does not fit it (a cost of 2^20 or more in a
// packed chunk, an instant 2^44 µs past base) starts a new chunk.
//
// 128 bytes: a 64-byte line holds the header and the first five words.
type logChunk struct {
	next   *logChunk // the next newer chunk; after the tail, a free chunk or nil
	base   int64
	lo, hi uint8
	wide   bool
	w      [chunkWords]uint64
}

const (
	chunkWords = 13
	costBits   = 20
	deltaBits  = 64 - costBits
	costMask   = 1<<costBits - 1
	maxDelta   = 1<<deltaBits - 1
	// maxLogChunks bounds the walks through a log's chunks, for a reader
	// without the store's lock (memstore's peek), which may follow links
	// while a check changes them and discards what it read: a real log
	// has fewer (it would hold over two billion events).
	maxLogChunks = 1 << 24
)

// oneEvent marks a log of one event, kept in the Log itself.
var oneEvent logChunk

// logIter walks a log's events from the oldest. Its reads are bounded
// whatever the chunks hold (see logChunk.span and maxLogChunks), so a
// reader without the store's lock can never index past a chunk or walk
// without end (TestLogEvalAnyChunks).
type logIter struct {
	c, tail  *logChunk
	i, hi    int
	wide     bool
	base     int64
	steps    int
	at, cost int64
	one      bool // the log is one event, not yet read
}

func (s *Log) iter() logIter {
	switch s.head {
	case nil:
		return logIter{}
	case &oneEvent:
		return logIter{one: true, at: s.oldest, cost: s.sum}
	}
	it := logIter{c: s.head, tail: s.tail}
	it.load()
	return it
}

// span returns a chunk's events as word indexes, within w whatever the
// header holds.
func (c *logChunk) span() (lo, hi int) {
	lo, hi = int(c.lo), min(int(c.hi), chunkWords)
	return lo, hi
}

func (it *logIter) load() {
	it.i, it.hi = it.c.span()
	it.wide, it.base = it.c.wide, it.c.base
}

// next moves to the next event (at, cost), reporting whether there is one.
func (it *logIter) next() bool {
	if it.one {
		it.one = false
		return true
	}
	for it.c != nil {
		if it.wide {
			if it.i+1 < it.hi {
				it.at, it.cost = int64(it.c.w[it.i]), int64(it.c.w[it.i+1])
				it.i += 2
				return true
			}
		} else if it.i < it.hi {
			x := it.c.w[it.i]
			it.at, it.cost = it.base+int64(x>>costBits), int64(x&costMask)
			it.i++
			return true
		}
		if it.c == it.tail || it.steps >= maxLogChunks {
			break
		}
		it.steps++
		if it.c = it.c.next; it.c != nil {
			it.load()
		}
	}
	it.c = nil
	return false
}

// newest returns the newest event; ok is false when the log is empty.
func (s *Log) newest() (at, cost int64, ok bool) {
	switch s.head {
	case nil:
		return 0, 0, false
	case &oneEvent:
		return s.oldest, s.sum, true
	}
	t := s.tail
	lo, hi := t.span()
	if t.wide {
		if hi-2 >= lo && hi >= 2 {
			return int64(t.w[hi-2]), int64(t.w[hi-1]), true
		}
	} else if hi-1 >= lo && hi >= 1 {
		x := t.w[hi-1]
		return t.base + int64(x>>costBits), int64(x & costMask), true
	}
	return 0, 0, false // an empty tail: only in a torn read
}

// used returns the cost of the events in (now − W, now]: sum, less the
// events that have left, found from the oldest.
func (s *Log) used(p Params, now int64) int64 {
	used := s.sum
	if s.head == nil || s.oldest > now-p.Window {
		return used
	}
	for it := s.iter(); it.next() && it.at <= now-p.Window; {
		used -= it.cost
	}
	return used
}

// Eval implements State.
func (s *Log) Eval(p Params, now, cost int64) Result {
	used := s.used(p, now)
	r := Result{Used: float64(used), ResetAfter: s.resetAfter(p, now)}
	if r.Allowed = used+cost <= p.Rate; !r.Allowed {
		r.RetryAfter = s.retryAfter(p, now, used, cost)
	}
	return r
}

// retryAfter returns the µs until cost fits on used, the cost of the
// events in the window. The cost fits once enough of the oldest events
// have left: event i leaves (now − W, now] when now reaches At + W.
func (s *Log) retryAfter(p Params, now int64, used, cost int64) int64 {
	for it := s.iter(); it.next(); {
		if it.at <= now-p.Window {
			continue // left already: not in used
		}
		used -= it.cost
		if used+cost <= p.Rate {
			return it.at + p.Window - now
		}
	}
	return 0
}

func (s *Log) resetAfter(p Params, now int64) int64 {
	at, _, ok := s.newest()
	if !ok {
		return 0
	}
	return max(0, at+p.Window-now)
}

// Record implements State. It drops the events that have left the window.
func (s *Log) Record(p Params, now, cost int64) (float64, int64) {
	used := s.used(p, now)
	s.add(p, now, used, cost)
	return float64(used + cost), s.resetAfter(p, now)
}

// add records cost at now, first dropping the events that have left the
// window; used is the cost of the others.
func (s *Log) add(p Params, now, used, cost int64) {
	if s.head != nil && s.oldest <= now-p.Window {
		s.drop(now - p.Window)
	}
	// A clock behind the newest event (at > now): keep the log ordered by
	// recording at the newest instant, which leaves the window last.
	if at, c, ok := s.newest(); ok && at >= now {
		s.setLast(at, c+cost)
	} else {
		s.push(now, cost)
	}
	s.sum = used + cost
}

// drop removes the events at or before horizon, taking their costs off sum.
func (s *Log) drop(horizon int64) {
	if s.head == &oneEvent {
		if s.oldest <= horizon {
			*s = Log{}
		}
		return
	}
	for c := s.head; c != nil; {
		for c.lo < c.hi {
			var at, cost int64
			if c.wide {
				at, cost = int64(c.w[c.lo]), int64(c.w[c.lo+1])
			} else {
				x := c.w[c.lo]
				at, cost = c.base+int64(x>>costBits), int64(x&costMask)
			}
			if at > horizon {
				s.oldest = at
				return
			}
			s.sum -= cost
			if c.wide {
				c.lo += 2
			} else {
				c.lo++
			}
		}
		if c == s.tail {
			*s = Log{} // every event left
			return
		}
		// The emptied head is kept as the chunk the tail fills next,
		// unless one is kept already.
		s.head = c.next
		c.next = nil
		if s.tail.next == nil {
			s.tail.next = c
		}
		c = s.head
	}
}

// push appends an event after the newest (at is later than it). The
// caller sets sum after it.
func (s *Log) push(at, cost int64) {
	switch s.head {
	case nil:
		s.head, s.oldest = &oneEvent, at
		return
	case &oneEvent:
		// The second event: the log takes a chunk, which the first
		// event's cost (sum, for now) and instant go into.
		c := new(logChunk)
		c.put(s.oldest, s.sum)
		s.head, s.tail = c, c
	}
	if !s.tail.put(at, cost) {
		c := s.tail.next
		if c == nil {
			c = new(logChunk)
		} else {
			*c = logChunk{}
		}
		c.put(at, cost)
		s.tail.next, s.tail = c, c
	}
}

// put appends an event to c if it has room and the event fits its form,
// reporting whether it did. An empty chunk takes the event's form.
func (c *logChunk) put(at, cost int64) bool {
	if c.lo == c.hi {
		c.lo, c.hi = 0, 0
		c.wide = uint64(cost) > costMask
		c.base = at
	}
	if c.wide {
		if int(c.hi)+2 > chunkWords {
			return false
		}
		c.w[c.hi], c.w[c.hi+1] = uint64(at), uint64(cost)
		c.hi += 2
		return true
	}
	d := uint64(at - c.base)
	if int(c.hi) >= chunkWords || uint64(cost) > costMask || d > maxDelta {
		return false
	}
	c.w[c.hi] = d<<costBits | uint64(cost)
	c.hi++
	return true
}

// setLast sets the newest event's cost (its instant stays at). The
// caller sets sum after it.
func (s *Log) setLast(at, cost int64) {
	if s.head == &oneEvent {
		return // its cost is sum
	}
	t := s.tail
	if t.wide {
		t.w[t.hi-1] = uint64(cost)
		return
	}
	if uint64(cost) <= costMask {
		t.w[t.hi-1] = uint64(at-t.base)<<costBits | uint64(cost)
		return
	}
	// Too large for a packed word: the event moves to a wide chunk.
	s.pop()
	s.push(at, cost)
}

// pop removes the newest event. The caller sets sum after it; a log left
// with no event is reset.
func (s *Log) pop() {
	switch s.head {
	case nil:
		return
	case &oneEvent:
		*s = Log{}
		return
	}
	t := s.tail
	if t.wide {
		t.hi -= 2
	} else {
		t.hi--
	}
	if t.lo < t.hi {
		return
	}
	if s.head == t {
		*s = Log{}
		return
	}
	// The tail emptied: the chunk before it becomes the tail, the emptied
	// one its free chunk.
	c := s.head
	for c.next != t {
		c = c.next
	}
	t.next = nil
	s.tail = c
}

// Check is Decide for one hit on s, fused: Eval, then Record when the hit
// is allowed (or shadow) and cost > 0, finding the usage once. The
// outcome and the state are those of Eval and Record
// (TestCheckIsEvalRecord).
func (s *Log) Check(p Params, now, cost int64, shadow bool) Outcome {
	used := s.used(p, now)
	o := Outcome{Allowed: used+cost <= p.Rate, Used: float64(used)}
	if !o.Allowed {
		o.RetryAfter = s.retryAfter(p, now, used, cost)
	}
	if (o.Allowed || shadow) && cost > 0 {
		s.add(p, now, used, cost)
		o.Used = float64(used + cost)
	}
	o.ResetAfter = s.resetAfter(p, now)
	return o
}

// Events returns a copy of the log's events, oldest first (tests and
// diagnostics: it allocates).
func (s *Log) Events() []Event {
	var out []Event
	for it := s.iter(); it.next(); {
		out = append(out, Event{At: it.at, Cost: it.cost})
	}
	if out == nil {
		out = []Event{}
	}
	return out
}
