package memstore

import (
	"crypto/sha256"
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
// first; what a check writes (denied, seq, expires) comes last, right
// before the state that follows the entry, so a check writes one
// contiguous run of bytes 66 to 80 plus the state: one cache line, or
// two when the run crosses a line boundary, where the fields it wrote
// used to lie at both ends of the object (two or three lines). A line a
// core writes must be moved to the next core that touches it; lines
// only read are shared (see "Recording without the shard's lock" in
// docs/memstore.md).
type entry struct {
	long      string // group+zone+key, when longer than inlineID and at most maxWhole
	inline    [inlineID]byte
	window    int64 // µs; a buckets entry's bucket length is in bucketsEntry
	zoneLen   int32
	groupLen  int32
	algorithm uint8
	inlineLen uint8 // length of group+zone+key in inline; 0 when it is in long or hashed
	denied    bool  // the last check that held the state was denied: a hint for peek
	// seq is the state's lock and peek's sequence lock on it: odd while
	// a check holds the state (see tryLock), even otherwise; odd for good
	// once the entry has left its table.
	seq     uint32
	expires int64 // µs since the epoch: the last Record's now + ResetAfter; only grows
}

// tryLock takes e's lock if it is free: seq from even to odd, by
// compare-and-swap. Every writer of the state, of expires and of denied
// holds it: a check recording without the shard's lock (lockFree) holds
// only it, and waits for nothing while it does; checks under the shard's
// lock take it too. An entry leaves its table only locked and stays
// locked for good, so a check that takes the lock of an entry it found in
// the table knows the entry is still there. peek reads seq as a sequence
// lock's reader.
func (e *entry) tryLock() bool {
	s := atomic.LoadUint32(&e.seq)
	return s&1 == 0 && atomic.CompareAndSwapUint32(&e.seq, s, s+1)
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

// unlock releases e's lock. A plain store: stores become visible in
// program order where peek and lock-free recording run (amd64), so a
// reader that sees the new seq sees the state written before it, and the
// next holder's compare-and-swap orders everything after.
func (e *entry) unlock() {
	e.seq++
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
	if e.inlineLen > 0 {
		// The lengths are equal: compare only what is not empty.
		n := int(e.inlineLen)
		return n == z+len(k.Key) && (g == 0 || string(e.inline[:g]) == k.Group) &&
			(z == g || string(e.inline[g:z]) == k.Zone) && string(e.inline[z:n]) == k.Key
	}
	return len(e.long) == z+len(k.Key) && e.long[:g] == k.Group && e.long[g:z] == k.Zone && e.long[z:] == k.Key
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
