package algo

import "testing"

// TestRefundAfterTheWindowMoved: a cost recorded in window i and refunded
// after another record moved the state into window i+1 comes out of the
// previous window, where it was recorded, not out of the other checks'
// usage in the new one. The same for a bucket the ring has moved past.
func TestRefundAfterTheWindowMoved(t *testing.T) {
	p := Params{Rate: 10, Window: 60_000_000, Bucket: 6_000_000}
	const t0 = 120_000_000 + 59_000_000 // late in window 2

	w := &Window{}
	at := RecordedAt(w, p, t0)
	w.Record(p, t0, 3)           // the check to refund, in window 2
	w.Record(p, t0+2_000_000, 1) // another check, in window 3
	w.Refund(p, at, 3)
	if w.Index != 3 || w.Prev != 0 || w.Cur != 1 {
		t.Errorf("window after the refund: index %d prev %d cur %d, want 3, 0, 1", w.Index, w.Prev, w.Cur)
	}

	b := &Buckets{}
	b.Record(p, t0-30_000_000, 1) // an earlier event, so the ring exists
	at = RecordedAt(b, p, t0)
	b.Record(p, t0, 3)           // bucket 29
	b.Record(p, t0+2_000_000, 1) // bucket 30
	b.Refund(p, at, 3)
	if got := b.Counts[floorMod(floorDiv(t0, p.Bucket), int64(len(b.Counts)))]; got != 0 {
		t.Errorf("bucket of the refunded record holds %d, want 0", got)
	}
	if got := b.Counts[floorMod(b.Head, int64(len(b.Counts)))]; got != 1 {
		t.Errorf("newest bucket holds %d, want the other check's 1", got)
	}

	// A clock behind the state: the record went into the state's window,
	// and the refund takes it from there.
	w = &Window{}
	w.Record(p, t0+2_000_000, 1) // window 3
	at = RecordedAt(w, p, t0)    // behind: window 2's instant, recorded in 3
	w.Record(p, t0, 3)
	w.Refund(p, at, 3)
	if w.Index != 3 || w.Cur != 1 {
		t.Errorf("clock behind: index %d cur %d, want 3, 1", w.Index, w.Cur)
	}
}
