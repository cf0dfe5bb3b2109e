package memstore

import (
	"crypto/sha256"
	"unsafe"

	"github.com/sluicehq/sluice/internal/algo"
)

// stateKey identifies one state: the fields by which two sluice.Hits share
// state, the check's Group included (as in redisstore, where the group is
// the hash tag). Lookups build it from the caller's strings, without
// copying.
type stateKey struct {
	group     string
	zone, key string
	// sum is the digest of group, zone and key when together they are
	// longer than maxWhole (see identity), else nil. It points into the
	// caller's stack.
	sum       *[idSum]byte
	window    int64 // µs
	bucket    int64 // µs
	algorithm uint8 // see algoCode
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
type entry struct {
	expires   int64 // µs since the epoch: the last Record's now + ResetAfter
	window    int64
	bucket    int64
	zoneLen   int32
	groupLen  int32
	algorithm uint8
	inlineLen uint8  // length of group+zone+key in inline; 0 when it is in long or hashed
	long      string // group+zone+key, when longer than inlineID and at most maxWhole
	inline    [inlineID]byte
}

// setID stores k's identity in e, copying its strings: a stored state never
// pins the caller's (possibly much larger) buffers.
func (e *entry) setID(k *stateKey) {
	e.window, e.bucket = k.window, k.bucket // e.algorithm was set by newEntry
	e.zoneLen, e.groupLen = int32(len(k.zone)), int32(len(k.group))
	n := len(k.group) + len(k.zone) + len(k.key)
	switch {
	case k.sum != nil:
		e.inline = *k.sum
	case n <= inlineID:
		g := copy(e.inline[:], k.group)
		copy(e.inline[g+copy(e.inline[g:], k.zone):], k.key)
		e.inlineLen = uint8(n) // keys are never empty, so n > 0
	default:
		e.long = k.group + k.zone + k.key
	}
}

// is reports whether e holds the state identified by k.
func (e *entry) is(k *stateKey) bool {
	if e.window != k.window || e.bucket != k.bucket || e.algorithm != k.algorithm ||
		int(e.zoneLen) != len(k.zone) || int(e.groupLen) != len(k.group) {
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
		return n == z+len(k.key) && (g == 0 || string(e.inline[:g]) == k.group) &&
			(z == g || string(e.inline[g:z]) == k.zone) && string(e.inline[z:n]) == k.key
	}
	return len(e.long) == z+len(k.key) && e.long[:g] == k.group && e.long[g:z] == k.zone && e.long[z:] == k.key
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
		s algo.Buckets
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

// state returns e's algorithm state as an algo.State.
func (e *entry) state() algo.State {
	switch e.algorithm {
	case codeBuckets:
		return &(*bucketsEntry)(unsafe.Pointer(e)).s
	case codeLog:
		return &(*logEntry)(unsafe.Pointer(e)).s
	case codeDecay:
		return &(*decayEntry)(unsafe.Pointer(e)).s
	case codeGCRA:
		return e.gcraState()
	}
	return e.windowState()
}
