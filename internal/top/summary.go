package top

import (
	"crypto/sha256"
	"math"
)

// KeyBytes is the longest key an entry copies whole. A longer key is
// counted by its hash, shown by its digest (computed when it enters the
// summary) and cannot be reset from the list: its bytes are not kept.
const KeyBytes = 128

// entry is one counter of a summary, but for its count (summary.counts).
// An entry whose count is 0 is free; its other fields are stale.
type entry struct {
	hash uint64
	// err bounds the count's overestimate (the count of the counter it
	// took over).
	err int64
	// since is when the key was first observed in its current streak (a
	// streak continues while the key is counted in consecutive buckets);
	// last is its latest observation. Unix nanoseconds.
	since, last int64
	// peak is the highest usage fraction observed, in millionths.
	peak int64
	// shadow is whether the latest observation was a shadow denial.
	shadow bool
	// long is whether the key was longer than KeyBytes: key holds its
	// first KeyBytes bytes and digest the first 8 bytes of its SHA-256.
	long   bool
	klen   uint8
	key    [KeyBytes]byte
	digest [8]byte
}

func (e *entry) keyString() string { return string(e.key[:e.klen]) }

type slot struct {
	hash uint64
	x    uint16
}

// obs is one observation of a key.
type obs struct {
	hash    uint64
	key     string
	weight  int64
	now     int64
	peak    int64
	shadow  bool
	inherit *summary // the previous bucket, whose streak start the key keeps
}

// summary is a Space-Saving summary of at most len(entries) keys: an
// open-addressing index from key hash to entry, the entries' counts
// apart from them, and the entries known to hold the smallest count. Not
// safe for concurrent use.
//
// A new key takes over a counter with the smallest count. Rather than
// keep the counters ordered (a heap sifted on every take-over), the
// summary gathers, by one scan of counts, the entries whose count is the
// smallest, min, and takes them over one by one. Between two gatherings
// counts only grow (a take-over adds the new key's weight to min, an
// increment to a count; a removal, which lowers one, empties mins), so an
// entry of mins whose count is still min holds the smallest count; one
// whose count grew is dropped. Once mins is empty the summary gathers
// again: a scan of 8 bytes per counter, paid for by the take-overs since
// the last (every counter at the smallest count is one take-over without
// a scan). Increments of keys already counted touch neither.
type summary struct {
	entries []entry
	// counts[x] is entries[x]'s count: the key's estimated weight, 0 for
	// a free entry.
	counts []int64
	// index maps a hash slot to the hash and 1 + the entry's index (0:
	// empty), so that probing reads no entry. Linear probing; deletion
	// shifts back, so there are no tombstones.
	index []slot
	// mins are entries whose count was min when gathered, the smallest
	// then; see summary.
	mins []uint16
	min  int64
	// total is the weight observed in this summary.
	total int64
}

func newSummary(capacity int) *summary {
	n := 1
	for n < 2*capacity {
		n <<= 1
	}
	return &summary{entries: make([]entry, capacity), counts: make([]int64, capacity), index: make([]slot, n), mins: make([]uint16, 0, capacity)}
}

// reset forgets every key.
func (s *summary) reset() {
	clear(s.counts)
	clear(s.index)
	s.mins = s.mins[:0]
	s.total = 0
}

// slot returns the index slot holding hash, or the empty slot where it
// would go (found false).
func (s *summary) slot(hash uint64) (slot int, found bool) {
	mask := len(s.index) - 1
	for i := int(hash) & mask; ; i = (i + 1) & mask {
		x := &s.index[i]
		if x.x == 0 {
			return i, false
		}
		if x.hash == hash {
			return i, true
		}
	}
}

// find returns the entry counting hash, or nil.
func (s *summary) find(hash uint64) *entry {
	if i, ok := s.slot(hash); ok {
		return &s.entries[s.index[i].x-1]
	}
	return nil
}

// add counts o: its entry's count grows by o.weight (> 0), or a counter
// with the smallest count is taken over.
func (s *summary) add(o *obs) {
	s.total += o.weight
	i, ok := s.slot(o.hash)
	if ok {
		x := int(s.index[i].x - 1)
		s.counts[x] += o.weight
		e := &s.entries[x]
		e.last, e.shadow, e.peak = o.now, o.shadow, max(e.peak, o.peak)
		return
	}
	x := s.smallest()
	c := s.counts[x]
	e := &s.entries[x]
	if c > 0 {
		s.unindex(e.hash)
		i, _ = s.slot(o.hash) // the shift may have moved the empty slot
	}
	since := o.now
	if o.inherit != nil && o.inherit.total > 0 {
		if p := o.inherit.find(o.hash); p != nil {
			since = p.since
		}
	}
	s.counts[x] = c + o.weight
	// Field by field: the key's bytes past its length are left as they
	// were (never read), not cleared.
	e.hash, e.err = o.hash, c
	e.since, e.last, e.peak, e.shadow = since, o.now, o.peak, o.shadow
	e.setKey(o.key)
	s.index[i] = slot{hash: o.hash, x: uint16(x + 1)}
}

// smallest returns an entry with the smallest count, taking it out of
// mins (its count is about to grow).
func (s *summary) smallest() int {
	for {
		for n := len(s.mins); n > 0; n-- {
			x := s.mins[n-1]
			s.mins = s.mins[:n-1]
			if s.counts[x] == s.min {
				return int(x)
			}
		}
		s.gather()
	}
}

// gather makes mins the entries with the smallest count, min, in one
// pass over counts.
func (s *summary) gather() {
	m, mins := int64(math.MaxInt64), s.mins[:0]
	for x, c := range s.counts {
		if c <= m {
			if c < m {
				m, mins = c, mins[:0]
			}
			mins = append(mins, uint16(x))
		}
	}
	s.mins, s.min = mins, m
}

func (e *entry) setKey(key string) {
	if len(key) <= KeyBytes {
		e.long, e.klen = false, uint8(copy(e.key[:], key))
		return
	}
	e.long, e.klen = true, uint8(copy(e.key[:], key))
	sum := sha256.Sum256([]byte(key))
	copy(e.digest[:], sum[:8])
}

// remove forgets hash, if counted: its entry becomes free, and mins is
// emptied (the free entry's count is below min).
func (s *summary) remove(hash uint64) {
	i, ok := s.slot(hash)
	if !ok {
		return
	}
	x := int(s.index[i].x - 1)
	s.unindex(hash)
	s.counts[x] = 0
	s.mins = s.mins[:0]
}

// unindex deletes hash from the index, shifting back the entries probed
// after it so that every probe sequence stays unbroken.
func (s *summary) unindex(hash uint64) {
	i, ok := s.slot(hash)
	if !ok {
		return
	}
	mask := len(s.index) - 1
	for {
		s.index[i] = slot{}
		j := i
		for {
			j = (j + 1) & mask
			if s.index[j].x == 0 {
				return
			}
			home := int(s.index[j].hash) & mask
			// The entry at j may stay unless its home lies cyclically
			// outside (i, j].
			if i <= j && i < home && home <= j || i > j && (home > i || home <= j) {
				continue
			}
			break
		}
		s.index[i] = s.index[j]
		i = j
	}
}
