package memstore

import (
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/ident"
)

// stateKey is one state's identity: ident.State, the one definition of
// "the same state" every store shares (zone, key, the check's group,
// algorithm, window, bucket length), and the digest of its group, zone and
// key when they are too long to keep whole (see below). Lookups build it
// from the caller's strings, without copying.
type stateKey struct {
	ident.State
	// sum is the digest of group, zone and key when together they are
	// longer than maxWhole, else nil. It points into the caller's stack.
	sum *[idSum]byte
}

// An entry keeps its state's group, zone and key in one of three ways, by
// their length together, so that a state costs a bounded number of bytes however
// long its key (sluice.MaxKeyLen is 64 KiB):
//
//   - up to inlineID bytes: whole, in the entry's own memory. Short keys
//     (addresses, user and token IDs) cost no allocation of their own and
//     no extra cache miss to compare.
//   - up to maxWhole bytes: whole, in one separate string.
//   - longer: the SHA-256 of group, zone and key, in the entry's own
//     memory, and the group's and zone's lengths. Two identities share a state only if their
//     digests collide, which nobody knows how to make happen.
const (
	inlineID = 32
	maxWhole = 64
	idSum    = sha256.Size // == inlineID: a digest fits the inline array
)

// digest writes the SHA-256 of group, zone and key, one after the other,
// into sum, without copying or allocating. (The group's and zone's lengths
// are kept beside the digest, so the concatenation is unambiguous.)
func digest(sum *[idSum]byte, group, zone, key string) {
	h := sha256.New()
	h.Write(unsafe.Slice(unsafe.StringData(group), len(group))) // read only
	h.Write(unsafe.Slice(unsafe.StringData(zone), len(zone)))
	h.Write(unsafe.Slice(unsafe.StringData(key), len(key)))
	h.Sum(sum[:0])
}

// entry is one stored state's identity and deadline. Each algorithm's
// state follows it in the same allocation (see the entry types below), so
// a lookup touches the shard's slot and one object; the state is reached
// by the algorithm code, without an interface value in every entry.
//
// The identity, written once before the entry enters a table, comes
// first; what a check writes (seq, expires) comes last, right before the
// state that follows the entry, so a check writes one contiguous run of
// bytes: one cache line, or two when the run crosses a line boundary. A
// line a core writes must be moved to the next core that touches it;
// lines only read are shared.
//
// Words read without e's lock (seq, expires, and the state of the
// algorithms peek reads, see words) are written with sync/atomic, so
// that the sequence lock holds under Go's memory model, not only on
// today's compilers and processors, and the race detector checks the
// lock-free paths as they run.
type entry struct {
	long      string // group+zone+key, when longer than inlineID and at most maxWhole
	inline    [inlineID]byte
	window    int64 // µs; a buckets entry's bucket length is in bucketsEntry
	zoneLen   int32
	groupLen  int32
	algorithm uint8
	inlineLen uint8 // length of group+zone+key in inline; 0 when it is in long or hashed
	// seq is the state's lock and peek's sequence lock on it: seqLocked
	// while a check holds the state (see tryLock), for good once the
	// entry has left its table; seqDenied when the last check that held
	// it was denied (a hint for peek); and above them the number of times
	// the lock was released.
	seq     uint32
	expires int64 // µs since the epoch: the last Record's now + ResetAfter; only grows
}

// The bits of entry.seq.
const (
	seqLocked = 1 // a check holds the entry, or it left its table
	seqDenied = 2 // the last check that held the entry was denied
	seqOne    = 4 // one release of the lock
	seqCount  = 2 // seq>>seqCount counts the releases
	seqFlags  = seqOne - 1
)

// tryLock takes e's lock if it is free, by compare-and-swap. Every writer
// of the state, of expires and of seq holds it: a check recording without
// the shard's lock (recordOne) holds only it, and waits for nothing while
// it does; checks under the shard's lock take it too. An entry leaves its
// table only locked and stays locked for good, so a check that takes the
// lock of an entry it found in the table knows the entry is still there.
// peek reads seq as a sequence lock's reader.
func (e *entry) tryLock() bool {
	s := atomic.LoadUint32(&e.seq)
	return s&seqLocked == 0 && atomic.CompareAndSwapUint32(&e.seq, s, s|seqLocked)
}

// lock takes e's lock, waiting for a holder. The caller holds the lock of
// e's shard and found e in the table, so e is not dead and its holder, if
// any, is a check recording without the shard's lock, which waits for
// nothing.
func (e *entry) lock() {
	for i := 0; !e.tryLock(); i++ {
		if i >= 16 {
			runtime.Gosched() // the holder may have been descheduled
		}
	}
}

// unlock releases e's lock, counting the release and recording whether
// the check that held it was denied. The atomic store orders the state's
// atomic stores before it for a reader that loads the new seq.
func (e *entry) unlock(denied bool) {
	s := atomic.LoadUint32(&e.seq)&^seqFlags + seqOne
	if denied {
		s |= seqDenied
	}
	atomic.StoreUint32(&e.seq, s)
}

// extend moves e's reset deadline to d if that is later. e's lock must be
// held; expires is read without it (expiredAt).
func (e *entry) extend(d int64) {
	if d > e.expires {
		atomic.StoreInt64(&e.expires, d)
	}
}

// expiredAt reports whether e's deadline has passed at now, read without
// e's lock: expires only grows while e is in a table, so a deadline still
// ahead is reliable; one that has passed must be read again under the
// lock (see shard.expired).
func (e *entry) expiredAt(now int64) bool {
	return atomic.LoadInt64(&e.expires) <= now
}

// setID stores k's identity in e, copying its strings: a stored state never
// pins the caller's (possibly much larger) buffers.
func (e *entry) setID(k *stateKey) {
	e.window = k.Limit.Window // e.algorithm was set by newEntry
	if e.algorithm == codeBuckets {
		(*bucketsEntry)(unsafe.Pointer(e)).bucket = k.Limit.Bucket
	}
	e.zoneLen, e.groupLen = int32(len(k.Zone)), int32(len(k.Group))
	n := len(k.Group) + len(k.Zone) + len(k.Key)
	switch {
	case k.sum != nil:
		e.inline = *k.sum
	case n <= inlineID:
		g := copy(e.inline[:], k.Group)
		copy(e.inline[g+copy(e.inline[g:], k.Zone):], k.Key)
		e.inlineLen = uint8(n) // keys are never empty, so n > 0
	default:
		e.long = k.Group + k.Zone + k.Key
	}
}

// sameBucket reports whether e's bucket length is b's. Only buckets
// entries keep one (8 bytes in bucketsEntry): for every other algorithm
// the identity's bucket length is its window (ident.LimitOf), which is
// compared already.
func (e *entry) sameBucket(b int64) bool {
	return e.algorithm != codeBuckets || (*bucketsEntry)(unsafe.Pointer(e)).bucket == b
}

// is reports whether e holds the state identified by k.
func (e *entry) is(k *stateKey) bool {
	if e.window != k.Limit.Window || e.algorithm != k.Limit.Code || !e.sameBucket(k.Limit.Bucket) ||
		int(e.zoneLen) != len(k.Zone) || int(e.groupLen) != len(k.Group) {
		return false
	}
	if k.sum != nil {
		return e.inlineLen == 0 && e.long == "" && e.inline == *k.sum
	}
	g := int(e.groupLen)
	z := g + int(e.zoneLen)
	if n := int(e.inlineLen); n > 0 {
		// The lengths are equal: compare only what is not empty, the key
		// last, so that nothing is kept across its call.
		if n != z+len(k.Key) || z != g && !inlineEq(e.inline[g:z], k.Zone) || g != 0 && !inlineEq(e.inline[:g], k.Group) {
			return false
		}
		return inlineEq(e.inline[z:n], k.Key)
	}
	return len(e.long) == z+len(k.Key) && e.long[:g] == k.Group && e.long[g:z] == k.Zone && e.long[z:] == k.Key
}

// inlineEq reports whether b, a part of an entry's inline identity, and s,
// of b's length, hold the same bytes. It is string(b) == s without the
// call to the runtime's comparison, which costs a short key's lookup more
// than the comparison itself: up to 32 bytes are four pairs of 8-byte
// words, the last pairs overlapping the first ones when shorter.
func inlineEq(b []byte, s string) bool {
	n := len(b)
	t := unsafe.Slice(unsafe.StringData(s), n) // read only; len(s) == n
	le := binary.LittleEndian
	switch {
	case n >= 16:
		return (le.Uint64(b)^le.Uint64(t))|(le.Uint64(b[8:])^le.Uint64(t[8:]))|
			(le.Uint64(b[n-16:])^le.Uint64(t[n-16:]))|(le.Uint64(b[n-8:])^le.Uint64(t[n-8:])) == 0
	case n >= 8:
		return (le.Uint64(b)^le.Uint64(t))|(le.Uint64(b[n-8:])^le.Uint64(t[n-8:])) == 0
	case n >= 4:
		return (le.Uint32(b)^le.Uint32(t))|(le.Uint32(b[n-4:])^le.Uint32(t[n-4:])) == 0
	}
	for i := range b {
		if b[i] != t[i] {
			return false
		}
	}
	return true
}

// The entry types keep each algorithm's state in the entry's allocation.
// The entry is each type's first field, so a *entry made by newEntry is
// also a pointer to its typed entry (see the state accessors).
type (
	windowEntry struct {
		entry
		s algo.Window
	}
	bucketsEntry struct {
		entry
		bucket int64 // the bucket length of the identity, µs
		s      algo.Buckets
	}
	logEntry struct {
		entry
		s algo.Log
	}
	decayEntry struct {
		entry
		s algo.Decay
	}
	gcraEntry struct {
		entry
		s algo.GCRA
	}
)

// newEntry returns an entry, without identity, holding the empty state of
// an algorithm. Every entry is made here: the state accessors rely on it.
func newEntry(algorithm uint8) *entry {
	var e *entry
	switch algorithm {
	case codeBuckets:
		e = &new(bucketsEntry).entry
	case codeLog:
		e = &new(logEntry).entry
	case codeDecay:
		e = &new(decayEntry).entry
	case codeGCRA:
		e = &new(gcraEntry).entry
	default:
		e = &new(windowEntry).entry
	}
	e.algorithm = algorithm
	return e
}

// words is a copy of a state that peek reads without e's lock: the
// sliding window's, GCRA's or decay's, each a few 8-byte words (the
// array declarations below hold the sizes). Those states are written
// only through a copy (see entry.load and entry.publish), so every word a
// reader loads is stored atomically. The log's and the buckets' states
// (slices read in place) are read only under e's lock.
type words [3]uint64

var (
	_ [unsafe.Sizeof(algo.Window{}) - 3*8]struct{}
	_ [3*8 - unsafe.Sizeof(algo.Window{})]struct{}
	_ [unsafe.Sizeof(algo.GCRA{}) - 2*8]struct{}
	_ [2*8 - unsafe.Sizeof(algo.GCRA{})]struct{}
	_ [unsafe.Sizeof(algo.Decay{}) - 3*8]struct{}
	_ [3*8 - unsafe.Sizeof(algo.Decay{})]struct{}
)

// stateWords returns the words of e's state if peek reads it without the
// lock, else nil.
func (e *entry) stateWords() []uint64 {
	switch e.algorithm {
	case codeWindow:
		return unsafe.Slice((*uint64)(unsafe.Pointer(e.windowState())), 3)
	case codeGCRA:
		return unsafe.Slice((*uint64)(unsafe.Pointer(e.gcraState())), 2)
	case codeDecay:
		return unsafe.Slice((*uint64)(unsafe.Pointer(e.decayState())), 3)
	}
	return nil
}

// load copies the words ws of e's state into w with atomic loads: the
// reader's side, for peek, which holds no lock.
func (w *words) load(e *entry, ws []uint64) {
	for i := range ws {
		w[i] = atomic.LoadUint64(&ws[i])
		if i == 0 {
			midCopy(e)
		}
	}
}

// publish stores into ws, the words of e's state, the words of w that
// differ, atomically: the writer's side. e's lock must be held, so plain
// reads of ws see the holder's own writes.
func (w *words) publish(e *entry, ws []uint64) {
	for i := range ws {
		if ws[i] != w[i] {
			atomic.StoreUint64(&ws[i], w[i])
		}
		if i == 0 {
			midPublish(e)
		}
	}
}

// loadWindow and loadGCRA are load for the sliding window's and GCRA's
// states, field by field.
func (e *entry) loadWindow() algo.Window {
	s := e.windowState()
	i := atomic.LoadInt64(&s.Index)
	midCopy(e)
	return algo.Window{Index: i, Cur: atomic.LoadInt64(&s.Cur), Prev: atomic.LoadInt64(&s.Prev)}
}

func (e *entry) loadGCRA() algo.GCRA {
	s := e.gcraState()
	tat := atomic.LoadInt64(&s.TAT)
	midCopy(e)
	return algo.GCRA{TAT: tat, Frac: atomic.LoadInt64(&s.Frac)}
}

// window, gcra and decay view w as the state of that algorithm.
func (w *words) window() *algo.Window { return (*algo.Window)(unsafe.Pointer(w)) }
func (w *words) gcra() *algo.GCRA     { return (*algo.GCRA)(unsafe.Pointer(w)) }
func (w *words) decay() *algo.Decay   { return (*algo.Decay)(unsafe.Pointer(w)) }

// state returns w, copied from the state of an algorithm whose code is
// code, as an algo.State.
func (w *words) state(code uint8) algo.State {
	switch code {
	case codeGCRA:
		return w.gcra()
	case codeDecay:
		return w.decay()
	}
	return w.window()
}

// windowState returns the sliding-window state of an entry made by
// newEntry(codeWindow); gcraState likewise for codeGCRA. The conversion is
// the one from a struct's first field to the struct.
func (e *entry) windowState() *algo.Window {
	return &(*windowEntry)(unsafe.Pointer(e)).s
}

func (e *entry) gcraState() *algo.GCRA {
	return &(*gcraEntry)(unsafe.Pointer(e)).s
}

// bucketsState, logState and decayState are windowState for codeBuckets,
// codeLog and codeDecay.
func (e *entry) bucketsState() *algo.Buckets {
	return &(*bucketsEntry)(unsafe.Pointer(e)).s
}

func (e *entry) logState() *algo.Log {
	return &(*logEntry)(unsafe.Pointer(e)).s
}

func (e *entry) decayState() *algo.Decay {
	return &(*decayEntry)(unsafe.Pointer(e)).s
}

// state returns e's algorithm state as an algo.State.
func (e *entry) state() algo.State {
	switch e.algorithm {
	case codeBuckets:
		return e.bucketsState()
	case codeLog:
		return e.logState()
	case codeDecay:
		return e.decayState()
	case codeGCRA:
		return e.gcraState()
	}
	return e.windowState()
}
