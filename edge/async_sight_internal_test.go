package edge

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestViewAtTheFifthSight: a key's slot is made from the store's answer to
// its fifth check within the marks' two generations, and not before: its
// mark counts up to viewSight sights in its 2 bits. A key's sights count
// while each follows the one before within a generation; a key whose
// sights stop for more than one generation starts again from its first,
// so 4 sights and a fifth two generations later make no slot. Each case
// has an Async of its own and one key, whose mark no other key's can take
// over.
func TestViewAtTheFifthSight(t *testing.T) {
	if viewSight != 5 {
		t.Fatalf("viewSight %d, want 5", viewSight)
	}
	type step int // a check, or a change of the marks' generation
	const (
		store step = iota // a check decided by the store, leaving no slot
		slot              // a check decided by the store that makes the slot
		local             // a check decided from the view
		next              // the marks' next generation
		last              // the marks' last generation, before they wrap
	)
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"five", []step{store, store, store, store, slot, local}},
		{"across", []step{store, store, next, store, store, slot, local}},
		{"each-generation", []step{store, next, store, next, store, next, store, next, slot, local}},
		{"spread", []step{store, store, store, store, next, next, store, store, store, store, slot, local}},
		{"wrap", []step{last, store, store, store, store, next, slot, local}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, c := newMemAsync(t)
			var keys int64
			for i, s := range tc.steps {
				switch s {
				case next:
					a.seen.gen.Store(a.seen.gen.Load()%markGens + 1)
					continue
				case last:
					a.seen.gen.Store(markGens)
					continue
				case slot:
					keys = 1
				}
				want := sluice.FromStore
				if s == local {
					want = sluice.FromLocalView
				}
				var d sluice.Decision
				if err := a.Check(context.Background(), c, &d); err != nil || !d.Allowed || d.Source != want {
					t.Fatalf("step %d: %v %+v, want allowed from %v", i+1, err, d, want)
				}
				if got := a.Stats().Keys; got != keys {
					t.Fatalf("step %d: %d slots, want %d", i+1, got, keys)
				}
			}
		})
	}
}
