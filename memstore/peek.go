package memstore

import (
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice/internal/algo"
)

// peek decides a single-hit check without any lock when the check records
// nothing: a denial that is not shadow, or a cost of 0, on a sliding
// window, GCRA or decay state (the states of a few words, see words). It
// reads as the reader of two sequence locks: the shard's seq, around its
// reading of the table's address and size, and the entry's seq, around
// its copy of the state. An unchanged seq without seqLocked means no
// holder of the lock changed what was read in between, so the copy is
// the state at some instant of the check, when the entry was in the
// table, and the decision is the one the locked path would have made at
// that instant on the same clock reading (TestPeekIsLocked,
// TestLockFreeMatchesLocked). Every word it reads is loaded atomically and
// every word a lock holder writes that peek reads is stored atomically,
// so the reasoning holds under Go's memory model and the race detector
// checks it. Anything else (a change in progress, a state that allows
// the cost, another algorithm, an entry not found) returns done false,
// with the entry looked up and the shard's seq it was looked up under, so
// the locked path can skip its own lookup when the table has not changed.
//
// A hot key far over its limit is denied this way with no write to
// shared memory at all: no lock word, no sweep counter, and it reads
// only lines that checks write no more often than they change them (the
// shard's second line changes with the table's shape, an entry's with
// its state).
//
// The entry's denied hint (seqDenied, set by the last check that held
// the lock) keeps checks that will be allowed from evaluating twice.
func (sh *shard) peek(h uint64, k *stateKey, p algo.Params, shadow bool, now, cost int64) (e *entry, seq uint64, o algo.Outcome, done bool) {
	seq = atomic.LoadUint64(&sh.seq)
	if seq&1 != 0 {
		return nil, 1, o, false
	}
	tab, mask := sh.table()
	if atomic.LoadUint64(&sh.seq) != seq {
		return nil, 1, o, false
	}
	// shard.find on a table read without the lock: each slot loaded
	// atomically, and at most every slot visited once, since slots may
	// change under it. Written out here: a call costs a hot check
	// measurably.
	for i, n := h&mask, mask; ; i, n = (i+1)&mask, n-1 {
		sl := (*slot)(unsafe.Add(unsafe.Pointer(tab), i*uint64(unsafe.Sizeof(slot{})))) // i <= mask
		if e = sl.entry(); e == nil {
			return nil, seq, o, false
		}
		if atomic.LoadUint64(&sl.hash) == h && e.is(k) {
			break
		}
		if n == 0 {
			return nil, seq, o, false
		}
	}
	es := atomic.LoadUint32(&e.seq)
	if es&seqLocked != 0 || cost > 0 && (shadow || es&seqDenied == 0) {
		return e, seq, o, false
	}
	// The copy, typed where the fields are exported: a loop over
	// stateWords costs a hot denial 4% more instructions (callgrind).
	var r algo.Result
	switch e.algorithm {
	case codeWindow:
		st := e.loadWindow()
		if atomic.LoadUint32(&e.seq) != es {
			return e, seq, o, false
		}
		r = st.Eval(p, now, cost)
	case codeGCRA:
		st := e.loadGCRA()
		if atomic.LoadUint32(&e.seq) != es {
			return e, seq, o, false
		}
		r = st.Eval(p, now, cost)
	case codeDecay:
		var w words
		w.load(e, e.stateWords())
		if atomic.LoadUint32(&e.seq) != es {
			return e, seq, o, false
		}
		r = w.decay().Eval(p, now, cost)
	default:
		return e, seq, o, false
	}
	if cost > 0 && (r.Allowed || shadow) {
		return e, seq, o, false // to be recorded: under the lock
	}
	return e, seq, algo.Outcome(r), true
}
