package memstore

import (
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/algo"
)

// peek decides a single-hit check without the shard's lock when the
// check records nothing: a denial that is not shadow, or a cost of 0. It
// reads as the reader of two sequence locks: the shard's seq, around its
// reading of the table's slice header, and the entry's seq, around its
// copy of the state. An unchanged even seq means no holder of the lock
// changed what was read in between, so the copy is the state at some
// instant of the check, when the entry was in the table, and the decision
// is the one the locked path would have made at that instant on the same
// clock reading (TestPeekIsLocked). Anything else (a change in progress,
// a state that allows the cost, an entry not found) returns done false,
// with the entry looked up and the shard's seq it was looked up under, so
// the locked path can skip its own lookup when the table has not changed.
//
// A hot key far over its limit is denied this way with no write to
// shared memory at all: no lock word, no sweep counter, and it reads
// only lines that checks write no more often than they change them (the
// shard's second line changes with the table's shape, an entry's with
// its state). The reads are safe however they interleave with a
// holder's writes: the table's slice header is used only once seq shows
// it whole, every other read is one machine word (a pointer read is the
// old or the new pointer, and the object stays alive), identities never
// change once stored, and a state is evaluated from a copy its seq
// vouches for, or (log, buckets) in place by loops bounded by a slice
// header its seq vouches for, the result discarded unless seq still does.
//
// The entry's denied hint (set under the lock by the last locked check)
// keeps checks that will be allowed from evaluating twice.
func (sh *shard) peek(h uint64, k *stateKey, p algo.Params, shadow bool, o *algo.Outcome, now, cost int64) (e *entry, seq uint64, done bool) {
	seq = atomic.LoadUint64(&sh.seq)
	if seq&1 != 0 {
		return nil, 1, false
	}
	slots := sh.slots
	if atomic.LoadUint64(&sh.seq) != seq {
		return nil, 1, false
	}
	e = findIn(slots, h, k)
	if e == nil || cost > 0 && (shadow || !e.denied) {
		return e, seq, false
	}
	es := atomic.LoadUint32(&e.seq)
	if es&1 != 0 {
		return e, seq, false
	}
	var r algo.Result
	switch e.algorithm {
	case codeWindow:
		st := *e.windowState()
		if atomic.LoadUint32(&e.seq) != es {
			return e, seq, false
		}
		r = st.Eval(p, now, cost)
	case codeGCRA:
		st := *e.gcraState()
		if atomic.LoadUint32(&e.seq) != es {
			return e, seq, false
		}
		r = st.Eval(p, now, cost)
	case codeDecay:
		st := *e.decayState()
		if atomic.LoadUint32(&e.seq) != es {
			return e, seq, false
		}
		r = st.Eval(p, now, cost)
	case codeBuckets:
		// The ring is read in place, as the log's events are: Eval
		// reads no slot past the header vouched for here and loops
		// a bounded number of times whatever the slots hold
		// (TestBucketsEvalAnyCounts), and the result counts only if
		// seq still vouches for the slots after.
		st := *e.bucketsState()
		if atomic.LoadUint32(&e.seq) != es {
			return e, seq, false
		}
		r = st.Eval(p, now, cost)
		if atomic.LoadUint32(&e.seq) != es {
			return e, seq, false
		}
	case codeLog:
		// The events are read in place: the Log (tail chunk, word
		// count, instants) is vouched for before Eval reads them, its
		// walks are bounded whatever the chunks hold
		// (TestLogEvalAnyChunks), and the result is vouched for after.
		st := *e.logState()
		if atomic.LoadUint32(&e.seq) != es {
			return e, seq, false
		}
		r = st.Eval(p, now, cost)
		if atomic.LoadUint32(&e.seq) != es {
			return e, seq, false
		}
	default:
		return e, seq, false
	}
	if cost > 0 && (r.Allowed || shadow) {
		return e, seq, false // to be recorded: under the lock
	}
	*o = algo.Outcome{Allowed: r.Allowed, Used: r.Used, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
	return e, seq, true
}

// findIn is shard.find on a table read without the lock: it gives up
// after visiting every slot, since slots may change under it.
func findIn(slots []slot, h uint64, k *stateKey) *entry {
	mask := uint64(len(slots) - 1)
	for n, i := 0, h&mask; n < len(slots); n, i = n+1, (i+1)&mask {
		s := &slots[i]
		e := s.e
		if e == nil {
			return nil
		}
		if s.hash == h && e.is(k) {
			return e
		}
	}
	return nil
}
