//go:build memstore_hooks

package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
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
// torn one. Nothing depends on timing or scheduling: one goroutine runs
// it all.
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
