//go:build memstore_hooks

package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/ident"
)

// interleaved forces the interleaving a sequence lock exists for: a
// reader (a cost-0 check, which peek decides without a lock) copies the
// first word of a state, then, through midCopyHook, in the reader's own
// goroutine, a writer records on the same state, and only then does the
// reader copy the other words. The copy is torn: the first word from the
// state before the write, the others from the state after it. A reader
// that validates its copy against the entry's seq sees the change and
// decides under the state's lock on the state after the write; one that
// does not decides on the torn copy. The clock moves (the writer's check
// is in the next window), so that every word of the state changes and
// the torn copy is no state the locked path ever holds: the test checks
// that its decision differs from the ones on the states before and after
// the write, so the reader's exact answer tells a validated copy from a
// torn one. Then the other way round: a reader peeks in the middle of a
// writer's stores (midPublishHook), and must leave the check to the
// locked path. Nothing depends on timing or scheduling: one goroutine
// runs it all.
func interleaved(t *testing.T, a sluice.Algorithm) {
	const n = 300 // admissions before the reader and the writer
	table, _ := ident.Lookup(string(a))
	l := sluice.Limit{Rate: 700, Window: time.Minute, Algorithm: a}
	t0 := time.Unix(1_700_000_000, 0)                        // 20 s into a window of a minute
	tr, tw := t0.Add(10*time.Second), t0.Add(70*time.Second) // the reader's clock; the writer's, in the next window
	at := t0
	s := newStore(t, Options{Now: func() time.Time { return at }, MaxKeys: 64, Shards: 1})
	ctx := context.Background()
	unit := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: l}}, Cost: 1}
	var d sluice.Decision
	for i := range n {
		if err := s.Check(ctx, unit, &d); err != nil || !d.Allowed {
			t.Fatalf("admission %d: %v, allowed %v", i, err, d.Allowed)
		}
	}
	sh := &s.shards[0]
	e := sh.slots[findSlot(t, sh)].e

	// The states before and after the write, and the torn copy, by the
	// locked computation.
	var before words
	for range n {
		lockedResult(l, before.state(table.Code), t0.UnixMicro(), 1)
	}
	after := before
	wantWriter := lockedResult(l, after.state(table.Code), tw.UnixMicro(), 1)
	torn := after
	torn[0] = before[0]
	ws := e.stateWords()
	if ws == nil {
		// The log's and the buckets' states are read only under the
		// state's lock: peek copies nothing, and the hook must not run.
		midCopyHook = func(*entry) { t.Error("peek copied a state it reads only under the lock") }
		defer func() { midCopyHook = nil }()
		at = tr
		if err := s.Check(ctx, sluice.Check{Hits: unit.Hits}, &d); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !sameWords(ws, before[:len(ws)]) {
		t.Fatalf("the stored state %v is not the locked computation's %v", ws, before[:len(ws)])
	}
	read := func(w words) sluice.HitResult { return lockedResult(l, w.state(table.Code), tr.UnixMicro(), 0) }
	want, onBefore, onTorn := read(after), read(before), read(torn)
	if onTorn == want || onTorn == onBefore {
		t.Fatalf("the scenario cannot tell a torn copy: on it %+v, before the write %+v, after %+v", onTorn, onBefore, want)
	}

	fired := 0
	var writer sluice.Decision
	var writerErr error
	midCopyHook = func(he *entry) {
		if he != e || fired > 0 {
			return
		}
		fired++
		at = tw
		writerErr = s.Check(ctx, unit, &writer)
		at = tr
	}
	defer func() { midCopyHook = nil }()
	at = tr
	if err := s.Check(ctx, sluice.Check{Hits: unit.Hits}, &d); err != nil {
		t.Fatal(err)
	}
	midCopyHook = nil
	if fired != 1 {
		t.Fatalf("the reader's copy ran the hook %d times, want 1", fired)
	}
	if writerErr != nil || writer.Hits[0] != wantWriter {
		t.Fatalf("the writer: %v, %+v, want %+v", writerErr, writer.Hits[0], wantWriter)
	}
	if !sameWords(ws, after[:len(ws)]) {
		t.Fatalf("the stored state after the write %v is not the locked computation's %v", ws, after[:len(ws)])
	}
	if r := d.Hits[0]; r != want {
		if r == onTorn {
			t.Fatalf("the reader decided on a torn copy (the first word from before the write, the others from after it): %+v, want the locked decision on the state after the write, %+v", r, want)
		}
		t.Fatalf("the reader decided %+v, want the locked decision on the state after the write, %+v", r, want)
	}

	// The other way round: the writer's check stores the first word of
	// the new state, then, through midPublishHook, a reader peeks while
	// the other words are still the old ones. The entry is locked, so
	// peek must leave the check to the locked path; one that read a
	// locked entry would copy the torn state, and its unchanged seq would
	// not tell it.
	s = newStore(t, Options{Now: func() time.Time { return at }, MaxKeys: 64, Shards: 1})
	at = t0
	for i := range n {
		if err := s.Check(ctx, unit, &d); err != nil || !d.Allowed {
			t.Fatalf("admission %d: %v, allowed %v", i, err, d.Allowed)
		}
	}
	sh = &s.shards[0]
	sl := sh.slots[findSlot(t, sh)]
	e, ws = sl.e, sl.e.stateWords()
	k := stateKey{State: ident.State{Key: "k", Limit: ident.Limit{Code: table.Code, Window: l.Window.Microseconds(), Bucket: l.Bucket().Microseconds()}}}
	p := algo.Params{Rate: l.Rate, Window: l.Window.Microseconds(), Bucket: l.Bucket().Microseconds()}
	halfWritten := before
	halfWritten[0] = after[0]
	fired = 0
	midPublishHook = func(he *entry) {
		if he != e || fired > 0 {
			return
		}
		fired++
		if !sameWords(ws[:1], after[:1]) || !sameWords(ws[1:], before[1:len(ws)]) {
			t.Errorf("mid-write the state is %v, want the first word of %v and the others of %v", ws, after[:len(ws)], before[:len(ws)])
		}
		if _, _, o, done := sh.peek(sl.hash, &k, p, false, tr.UnixMicro(), 0); done {
			t.Errorf("peek decided while a writer held the entry, with the state half written: %+v (on that state the locked path gives %+v)", o, read(halfWritten))
		}
	}
	defer func() { midPublishHook = nil }()
	at = tw
	if err := s.Check(ctx, unit, &writer); err != nil || writer.Hits[0] != wantWriter {
		t.Fatalf("the writer: %v, %+v, want %+v", err, writer.Hits[0], wantWriter)
	}
	midPublishHook = nil
	if fired != 1 {
		t.Fatalf("the writer's stores ran the hook %d times, want 1", fired)
	}
}

// sameWords reports whether the state's words ws, read under no
// concurrency, are w.
func sameWords(ws []uint64, w []uint64) bool {
	for i := range ws {
		if ws[i] != w[i] {
			return false
		}
	}
	return true
}
