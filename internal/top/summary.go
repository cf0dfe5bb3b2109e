package top

import (
	"crypto/sha256"
)

// KeyBytes is the longest key an entry copies whole. A longer key is
// counted by its hash, shown by its digest (computed when it enters the
// summary) and cannot be reset from the list: its bytes are not kept.
const KeyBytes = 128

// entry is one counter of a summary. An entry with count 0 is free.
type entry struct {
	hash uint64
	// count is the key's estimated weight; err bounds its overestimate
	// (the count of the counter it took over).
	count, err int64
	// since is when the key was first observed in its current streak (a
	// streak continues while the key is counted in consecutive buckets);
	// last is its latest observation. Unix nanoseconds.
	since, last int64
	// peak is the highest usage fraction observed, in millionths.
	peak int64
	// shadow is whether the latest observation was a shadow denial.
	shadow bool
	// long is whether the key was longer than KeyBytes: key holds its
	// first KeyBytes bytes and digest its keyname digest.
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

type node struct {
	count int64
	x     uint16
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

// summary is a Space-Saving summary of at most cap(entries) keys: an
// open-addressing index from key hash to entry, and a min-heap of the
// entries by count, brought up to date only when the smallest counter is
// taken over (freshen). Not safe for concurrent use.
type summary struct {
	entries []entry
	// index maps a hash slot to the hash and 1 + the entry's index (0:
	// empty), so that probing reads no entry. Linear probing; deletion
	// shifts back, so there are no tombstones.
	index []slot
	// heap holds entry indices with their counts as of their last move
	// (at most the entries' counts), smallest first; pos is the inverse.
	heap []node
	pos  []uint16
	// total is the weight observed in this summary.
	total int64
}

func newSummary(capacity int) *summary {
	n := 1
	for n < 2*capacity {
		n <<= 1
	}
	s := &summary{entries: make([]entry, capacity), index: make([]slot, n), heap: make([]node, capacity), pos: make([]uint16, capacity)}
	for i := range s.heap {
		s.heap[i], s.pos[i] = node{x: uint16(i)}, uint16(i)
	}
	return s
}

// reset forgets every key.
func (s *summary) reset() {
	clear(s.entries)
	clear(s.index)
	for i := range s.heap {
		s.heap[i], s.pos[i] = node{x: uint16(i)}, uint16(i)
	}
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

// add counts o: its entry's count grows by o.weight, or the smallest
// counter is taken over.
func (s *summary) add(o *obs) {
	s.total += o.weight
	i, ok := s.slot(o.hash)
	if ok {
		x := int(s.index[i].x - 1)
		e := &s.entries[x]
		e.count += o.weight
		e.last, e.shadow, e.peak = o.now, o.shadow, max(e.peak, o.peak)
		return // the heap catches up when a counter is taken over
	}
	s.freshen()
	x := int(s.heap[0].x)
	e := &s.entries[x]
	if e.count > 0 {
		s.unindex(e.hash)
		i, _ = s.slot(o.hash) // the shift may have moved the empty slot
	}
	since := o.now
	if o.inherit != nil {
		if p := o.inherit.find(o.hash); p != nil {
			since = p.since
		}
	}
	*e = entry{hash: o.hash, count: e.count + o.weight, err: e.count, since: since, last: o.now, peak: o.peak, shadow: o.shadow}
	e.setKey(o.key)
	s.index[i] = slot{hash: o.hash, x: uint16(x + 1)}
	s.heap[0].count = e.count
	s.down(0)
}

// freshen makes the heap's smallest count the smallest of all entries.
// The heap orders the counts the entries had when it last moved them: an
// increment leaves it as it is (it costs a sift down the heap, which most
// observations, of keys already counted, need not pay), so a count there
// is at most the entry's. Raising the top's count to its entry's and
// sifting it down until the top is current leaves at the top an entry
// whose count is at most every other heap count, so at most every other
// entry's. Each sift is paid for by increments since the last one.
func (s *summary) freshen() {
	for {
		top := &s.heap[0]
		c := s.entries[top.x].count
		if c == top.count {
			return
		}
		top.count = c
		s.down(0)
	}
}

func (e *entry) setKey(key string) {
	if len(key) <= KeyBytes {
		e.klen = uint8(copy(e.key[:], key))
		return
	}
	e.long, e.klen = true, uint8(copy(e.key[:], key))
	sum := sha256.Sum256([]byte(key))
	copy(e.digest[:], sum[:8])
}

// remove forgets hash, if counted: its entry becomes free.
func (s *summary) remove(hash uint64) {
	i, ok := s.slot(hash)
	if !ok {
		return
	}
	x := int(s.index[i].x - 1)
	s.unindex(hash)
	s.entries[x] = entry{}
	p := int(s.pos[x])
	s.heap[p].count = 0
	s.up(p)
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

func (s *summary) less(a, b int) bool {
	return s.heap[a].count < s.heap[b].count
}

func (s *summary) swap(a, b int) {
	s.heap[a], s.heap[b] = s.heap[b], s.heap[a]
	s.pos[s.heap[a].x], s.pos[s.heap[b].x] = uint16(a), uint16(b)
}

func (s *summary) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.swap(i, m)
		i = m
	}
}

func (s *summary) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}
