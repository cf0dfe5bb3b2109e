package algo

// Log is the exact sliding log: every recorded event with its cost, oldest
// first. Used is the sum of the costs of the events in (now − W, now].
// Events recorded at the same microsecond share one entry, so a log holds at
// most Rate entries plus those a shadow limit records beyond it.
//
// A log of one event keeps it in the Log itself (its instant in oldest, its
// cost in sum): no memory of its own. Longer logs keep their events in
// chunks of 128 bytes (logChunk) linked in a ring, oldest first. Packed,
// one 8-byte word per event: its distance from the event before it in the
// high deltaBits bits, its cost in the low costBits bits; the Log keeps
// the oldest instant and the newest one's distance from it, so the
// instants follow from the oldest. A log turns wide, two words per event
// (instant and cost), when an event does not fit a word (a cost of 2^20
// or more, which only shadow limits reach, or 2^44 µs after the event
// before it) until it empties. The form changes how the events are kept,
// never which: every method reads back the same instants and costs
// (TestLogIsRefLog).
//
// A log grows by filling its newest chunk and linking a new one, never by
// copying its events. A chunk its events have all left stays in the ring
// as the next one to fill, so a log whose events come and go at the same
// pace allocates nothing. A check on a packed log where nothing has left
// the window reads only the Log (the usage is sum, the reset wait follows
// from the newest instant) and writes the new event's word in the newest
// chunk: it reads no chunk at all.
type Log struct {
	tail *logChunk // the newest event's chunk; nil when empty, &oneEvent for a log of one event
	// sum is the total cost of the events, kept by every method that
	// changes them, so that the usage takes the costs of the events that
	// have left the window off it instead of adding up the live ones.
	sum    int64
	oldest int64  // the oldest event's instant, when there is one
	meta   uint64 // chunked: the words used in tail, the wide bit and (packed) the newest instant less oldest
}

// Event is one recorded cost.
type Event struct {
	At   int64 // µs since the epoch
	Cost int64
}

// logChunk holds a log's event words: w[lo:] in the oldest chunk (lo is
// in the Log's meta), w[:count] in the tail, all of w in the others (every
// chunk but the tail is full). The oldest chunk is the tail's next, or its
// next's when the Log keeps a free chunk there.
type logChunk struct {
	next *logChunk // the next newer chunk; after the tail, the oldest chunk or the free one
	w    [chunkWords]uint64
}

const (
	chunkWords = 14
	costBits   = 20
	deltaBits  = 64 - costBits
	costMask   = 1<<costBits - 1
	maxDelta   = 1<<deltaBits - 1

	// A dense log keeps an event in half a word (a slot): its distance
	// from the event before in the high 32−denseCostBits bits, its cost
	// in the low denseCostBits bits. Half the bytes of a packed event, so
	// half the chunks to allocate, fault in and mark per event.
	chunkSlots    = 2 * chunkWords
	denseCostBits = 8
	denseCostMask = 1<<denseCostBits - 1
	maxDenseDelta = 1<<(32-denseCostBits) - 1
	countMask     = 1<<5 - 1 // meta: the slots (dense) or words used in the tail chunk
	wideBit       = 1 << 5   // meta: two words per event
	freeBit       = 1 << 6   // meta: the tail's next is a free chunk, the next to fill
	loShift       = 7        // meta: the oldest event's slot or word in the oldest chunk, 5 bits
	loMask        = 31 << loShift
	denseBit      = 1 << 12               // meta: half a word per event
	spanShift     = 13                    // meta: packed or dense, the newest instant less the oldest, in the bits above
	maxSpan       = 1<<(64-spanShift) - 1 // over sluice.MaxWindow: a log's events span less than its window

	// maxLogChunks bounds the walks through a log's chunks, for a reader
	// without the store's lock (memstore's peek), which may follow links
	// while a check changes them and discards what it read: a real log
	// has fewer (it would hold over two hundred million events).
	maxLogChunks = 1 << 24
)

// oneEvent marks a log of one event, kept in the Log itself.
var oneEvent logChunk

func (s *Log) count() int      { return int(s.meta & countMask) }
func (s *Log) wide() bool      { return s.meta&wideBit != 0 }
func (s *Log) dense() bool     { return s.meta&(denseBit|wideBit) == denseBit } // wide wins: a torn read may set both
func (s *Log) span() int64     { return int64(s.meta >> spanShift) }
func (s *Log) lo() int         { return int(s.meta&loMask) >> loShift }
func (s *Log) setLo(i int)     { s.meta = s.meta&^loMask | uint64(i)<<loShift }
func (s *Log) setSpan(d int64) { s.meta = uint64(d)<<spanShift | s.meta&(1<<spanShift-1) }
func (s *Log) setCount(n int)  { s.meta = s.meta&^countMask | uint64(n) }

// slots returns how many words (or, dense, slots) a chunk holds.
func (s *Log) slots() int {
	if s.dense() {
		return chunkSlots
	}
	return chunkWords
}

// word returns slot or word i of c as a packed word (distance and cost).
func (c *logChunk) word(i int, dense bool) uint64 {
	if !dense {
		return c.w[i]
	}
	x := uint64(uint32(c.w[i>>1] >> (32 * (i & 1))))
	return x>>denseCostBits<<costBits | x&denseCostMask
}

// setSlot sets dense slot i of c to the distance d and the cost.
func (c *logChunk) setSlot(i int, d, cost uint64) {
	x := d<<denseCostBits | cost
	sh := 32 * uint(i&1)
	c.w[i>>1] = c.w[i>>1]&^(0xffffffff<<sh) | x<<sh
}

// head returns the oldest chunk of a chunked log.
func (s *Log) head() *logChunk {
	h := s.tail.next
	if s.meta&freeBit != 0 && h != nil {
		h = h.next
	}
	return h
}

// logIter walks a log's events from the oldest. Its reads are bounded
// whatever the chunks and the Log hold (indexes are clamped to a chunk,
// walks to maxLogChunks links), so a reader without the store's lock can
// never index past a chunk or walk without end (TestLogEvalAnyChunks).
type logIter struct {
	c, tail  *logChunk
	i, end   int
	count    int
	slots    int
	wide     bool
	dense    bool
	first    bool // the next event is the oldest: its instant is the Log's
	one      bool // the log is one event, not yet read
	steps    int
	at, cost int64
}

// start sets it before the oldest event of s.
func (it *logIter) start(s *Log) {
	switch s.tail {
	case nil:
		return
	case &oneEvent:
		it.one, it.at, it.cost = true, s.oldest, s.sum
		return
	}
	it.slots, it.wide, it.dense = s.slots(), s.wide(), s.dense()
	it.tail, it.count, it.first, it.at = s.tail, min(s.count(), it.slots), true, s.oldest
	if it.c = s.head(); it.c != nil {
		it.load(s.lo())
	}
}

// load starts on chunk c at word lo.
func (it *logIter) load(lo int) {
	it.end = it.slots
	if it.c == it.tail {
		it.end = it.count
	}
	it.i = min(lo, it.end)
}

// next moves to the next event (at, cost), reporting whether there is one.
func (it *logIter) next() bool {
	if it.one {
		it.one = false
		return true
	}
	for it.c != nil {
		if it.wide {
			if it.i+1 < it.end {
				it.at, it.cost = int64(it.c.w[it.i]), int64(it.c.w[it.i+1])
				it.i += 2
				return true
			}
		} else if it.i < it.end {
			x := it.c.word(it.i, it.dense)
			if !it.first {
				it.at += int64(x >> costBits)
			}
			it.first = false
			it.cost = int64(x & costMask)
			it.i++
			return true
		}
		if it.c == it.tail || it.steps >= maxLogChunks {
			break
		}
		it.steps++
		if it.c = it.c.next; it.c != nil {
			it.load(0)
		}
	}
	it.c = nil
	return false
}

// newestAt returns the newest event's instant; ok is false when the log
// is empty. Packed, it reads no chunk.
func (s *Log) newestAt() (at int64, ok bool) {
	switch {
	case s.tail == nil:
		return 0, false
	case s.tail == &oneEvent || !s.wide():
		return s.oldest + s.span(), true
	}
	if n := min(s.count(), chunkWords); n >= 2 {
		return int64(s.tail.w[n-2]), true
	}
	return 0, false // an empty tail: only in a torn read
}

// newestCost returns the newest event's cost, of a log that has one.
func (s *Log) newestCost() int64 {
	if s.tail == &oneEvent {
		return s.sum
	}
	if s.wide() {
		return int64(s.tail.w[s.count()-1])
	}
	return int64(s.tail.word(s.count()-1, s.dense()) & costMask)
}

// used returns the cost of the events in (now − W, now]: sum, less the
// events that have left, found from the oldest.
func (s *Log) used(p Params, now int64) int64 {
	if s.tail == nil || s.oldest > now-p.Window {
		return s.sum
	}
	return s.usedLeft(p, now)
}

// usedLeft is used when some events have left.
func (s *Log) usedLeft(p Params, now int64) int64 {
	used := s.sum
	var it logIter
	for it.start(s); it.next() && it.at <= now-p.Window; {
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
	// The usual denial first: nothing has left, and the cost fits once
	// the oldest event leaves.
	if s.tail != nil && s.oldest > now-p.Window && !s.wide() {
		c := s.sum
		if s.tail != &oneEvent {
			h, lo := s.head(), s.lo()
			if h == nil || lo >= s.slots() {
				return 0 // only in a torn read
			}
			c = int64(h.word(lo, s.dense()) & costMask)
		}
		if used-c+cost <= p.Rate {
			return s.oldest + p.Window - now
		}
	}
	var it logIter
	for it.start(s); it.next(); {
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
	at, ok := s.newestAt()
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
	if s.tail != nil && s.oldest <= now-p.Window {
		s.drop(now - p.Window)
	}
	// A clock behind the newest event (at > now): keep the log ordered by
	// recording at the newest instant, which leaves the window last.
	if at, ok := s.newestAt(); ok && at >= now {
		s.setLast(s.newestCost() + cost)
	} else {
		s.push(now, cost)
	}
	s.sum = used + cost
}

// drop removes the events at or before horizon, taking their costs off
// sum. Chunks emptied leave the ring, but for one kept as the next to fill.
func (s *Log) drop(horizon int64) {
	if s.tail == &oneEvent {
		if s.oldest <= horizon {
			*s = Log{}
		}
		return
	}
	wide, dense, newest := s.wide(), s.dense(), s.oldest+s.span()
	at, first := s.oldest, true
	for c, lo := s.head(), s.lo(); ; lo = 0 {
		end := s.slots()
		if c == s.tail {
			end = s.count()
		}
		for i := lo; i < end; {
			var cost int64
			if wide {
				at, cost = int64(c.w[i]), int64(c.w[i+1])
			} else {
				x := c.word(i, dense)
				if !first {
					at += int64(x >> costBits)
				}
				cost = int64(x & costMask)
			}
			first = false
			if at > horizon {
				s.oldest = at
				s.setLo(i)
				if !wide {
					s.setSpan(newest - at)
				}
				return
			}
			s.sum -= cost
			if wide {
				i += 2
			} else {
				i++
			}
		}
		if c == s.tail {
			*s = Log{} // every event left
			return
		}
		next := c.next
		if s.meta&freeBit != 0 {
			s.tail.next.next = next // a free chunk is kept already: c leaves
		} else {
			s.meta |= freeBit // c stays after the tail, the next to fill
		}
		c = next
	}
}

// push appends an event after the newest (at is later than it). The
// caller sets sum after it.
func (s *Log) push(at, cost int64) {
	switch s.tail {
	case nil:
		s.tail, s.oldest, s.meta = &oneEvent, at, 0
		return
	case &oneEvent:
		// The second event: the log takes a chunk, and the first event
		// (its cost is sum, for now) goes into it.
		c := new(logChunk)
		c.next = c
		s.tail, s.meta = c, 0
		switch {
		case uint64(s.sum) > costMask:
			s.meta = wideBit
			s.put2(uint64(s.oldest), uint64(s.sum))
		case uint64(s.sum) <= denseCostMask:
			s.meta = denseBit
			s.putSlot(0, uint64(s.sum))
		default:
			s.put1(uint64(s.sum))
		}
	}
	if s.dense() {
		d, span := at-(s.oldest+s.span()), at-s.oldest
		if uint64(cost) <= denseCostMask && uint64(d) <= maxDenseDelta && uint64(span) <= maxSpan {
			s.putSlot(uint64(d), uint64(cost))
			s.setSpan(span)
			return
		}
		s.rebuild(0) // packed, or wide below
	}
	if !s.wide() {
		d, span := at-(s.oldest+s.span()), at-s.oldest
		if uint64(cost) <= costMask && uint64(d) <= maxDelta && uint64(span) <= maxSpan {
			s.put1(uint64(d)<<costBits | uint64(cost))
			s.setSpan(span)
			return
		}
		s.widen()
	}
	s.put2(uint64(at), uint64(cost))
}

// putSlot appends a dense event's slot, put1 a packed event's word, put2
// a wide event's words, to the tail chunk, or to the next one when they
// do not fit.
func (s *Log) putSlot(d, cost uint64) {
	n := s.room(1)
	s.tail.setSlot(n, d, cost)
	s.setCount(n + 1)
}

func (s *Log) put1(x uint64) {
	n := s.room(1)
	s.tail.w[n] = x
	s.setCount(n + 1)
}

func (s *Log) put2(at, cost uint64) {
	n := s.room(2)
	s.tail.w[n], s.tail.w[n+1] = at, cost
	s.setCount(n + 2)
}

// room returns where in the tail chunk k more words go: after its words,
// or at the start of the next chunk (the free one, or a new one linked
// after the tail) when they do not fit.
func (s *Log) room(k int) int {
	n := s.count()
	if n+k <= s.slots() {
		return n
	}
	f := s.tail.next
	if s.meta&freeBit != 0 {
		s.meta &^= freeBit
	} else {
		f = &logChunk{next: f}
		s.tail.next = f
	}
	s.tail = f
	return 0
}

// LogChunk is a chunk a Log may take as its free one (see Spare).
type LogChunk logChunk

// NewLogChunk allocates a chunk for Spare. It writes the chunk, so that
// its memory is faulted in here and not where Spare links it.
func NewLogChunk() *LogChunk {
	c := new(logChunk)
	c.next = c
	return (*LogChunk)(c)
}

// WantsChunk reports whether the next event recorded would allocate a
// chunk: the tail is full and no free chunk is kept. A caller that
// records under a lock others wait for (memstore's per-key lock)
// allocates it before with NewLogChunk and hands it to Spare under the
// lock, so that the allocation (which may wait for the collector) holds
// no one up. Read without the lock it may be wrong, which costs a chunk
// dropped or an allocation under the lock, never a wrong event.
func (s *Log) WantsChunk() bool {
	k := 1
	if s.wide() {
		k = 2
	}
	return s.tail != nil && s.tail != &oneEvent && s.meta&freeBit == 0 && s.count()+k > s.slots()
}

// Spare links c after the tail as the log's free chunk, the next to
// fill, if the log wants one (WantsChunk); else c is dropped.
func (s *Log) Spare(c *LogChunk) {
	if !s.WantsChunk() {
		return
	}
	f := (*logChunk)(c)
	f.next = s.tail.next
	s.tail.next = f
	s.meta |= freeBit
}

// widen turns a chunked packed or dense log wide: its events are copied
// into new chunks of two words per event (rare: it allocates).
func (s *Log) widen() { s.rebuild(wideBit) }

// rebuild copies a chunked log's events into new chunks of the form
// given by meta, wideBit or 0 (packed), which must hold them all: a
// dense log's events fit packed words, everyone's fit wide ones (rare:
// it allocates).
func (s *Log) rebuild(meta uint64) {
	ev, sum := s.Events(), s.sum
	c := new(logChunk)
	c.next = c
	*s = Log{tail: c, sum: sum, oldest: ev[0].At, meta: meta}
	prev := ev[0].At
	for _, e := range ev {
		if meta == wideBit {
			s.put2(uint64(e.At), uint64(e.Cost))
		} else {
			s.put1(uint64(e.At-prev)<<costBits | uint64(e.Cost))
		}
		prev = e.At
	}
	if meta != wideBit {
		s.setSpan(prev - s.oldest)
	}
}

// setLast sets the newest event's cost. The caller sets sum after it.
func (s *Log) setLast(cost int64) {
	switch {
	case s.tail == &oneEvent:
		return // its cost is sum
	case s.dense() && uint64(cost) > denseCostMask:
		s.rebuild(0)
	}
	if !s.wide() && uint64(cost) > costMask {
		s.widen()
	}
	n := s.count()
	switch {
	case s.wide():
		s.tail.w[n-1] = uint64(cost)
	case s.dense():
		s.tail.setSlot(n-1, s.tail.word(n-1, true)>>costBits, uint64(cost))
	default:
		s.tail.w[n-1] = s.tail.w[n-1]&^costMask | uint64(cost)
	}
}

// pop removes the newest event. The caller sets sum after it.
func (s *Log) pop() {
	if s.tail == nil || s.tail == &oneEvent {
		*s = Log{}
		return
	}
	t, n, k := s.tail, s.count(), 1
	if s.wide() {
		k = 2
	}
	h := s.head()
	if h == t && s.lo()+k == n {
		*s = Log{} // it was the only event
		return
	}
	if !s.wide() {
		s.setSpan(s.span() - int64(t.word(n-1, s.dense())>>costBits))
	}
	if n -= k; n > 0 {
		s.setCount(n)
		return
	}
	// The tail emptied: the chunk before it (full) becomes the tail, the
	// emptied one the next to fill.
	prev := h
	for prev.next != t {
		prev = prev.next
	}
	if s.meta&freeBit != 0 {
		t.next = t.next.next // keep one free chunk
	}
	s.meta |= freeBit
	s.tail = prev
	s.setCount(s.slots())
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
	out := []Event{}
	var it logIter
	for it.start(s); it.next(); {
		out = append(out, Event{At: it.at, Cost: it.cost})
	}
	return out
}
