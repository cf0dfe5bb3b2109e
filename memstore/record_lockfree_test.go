//go:build amd64 && !race

package memstore

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestRecordTakesNoShardLock: where lockFree is on, a check that records
// on a stored state is decided under the state's own lock while another
// holds the shard's mutex, for every algorithm, except the one check in
// sweepEvery on the state that goes through the shard's lock for the
// sweep (recordOne), which waits for it.
func TestRecordTakesNoShardLock(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		at := time.Unix(1_700_000_000, 0)
		s := newStore(t, Options{Now: func() time.Time { return at }, MaxKeys: 64, Shards: 1})
		l := sluice.Limit{Rate: 1000, Window: time.Minute, Algorithm: a}
		c := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: l}}, Cost: 1}
		var d sluice.Decision
		if err := s.Check(context.Background(), c, &d); err != nil || !d.Allowed {
			t.Fatalf("%s: first check: %v, allowed %v", a, err, d.Allowed)
		}
		sh := &s.shards[0]
		e := sh.slots[findSlot(t, sh)].e
		h := sh.slots[findSlot(t, sh)].hash
		sh.mu.Lock()
		recorded := 0
		for recorded < 3*sweepEvery {
			if (uint64(e.seq>>1)+h)%sweepEvery == 0 {
				break // the next check takes the shard's lock
			}
			done := make(chan error, 1)
			go func() {
				var d sluice.Decision
				err := s.Check(context.Background(), c, &d)
				if err == nil && (!d.Allowed || math.Abs(d.Hits[0].Used-float64(recorded+2)) > 1e-6) {
					err = fmt.Errorf("allowed %v, used %v, want %d", d.Allowed, d.Hits[0].Used, recorded+2)
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s: record %d: %v", a, recorded, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: record %d waited 10 s for the shard's lock", a, recorded)
			}
			recorded++
		}
		sh.mu.Unlock()
		if recorded == 0 || recorded >= 3*sweepEvery {
			t.Fatalf("%s: %d checks recorded without the shard's lock before the sampled one, want 1 to %d", a, recorded, sweepEvery-1)
		}
		// The sampled check counts sweepEvery checks towards the sweep.
		ops := sh.ops
		if err := s.Check(context.Background(), c, &d); err != nil || !d.Allowed {
			t.Fatalf("%s: sampled check: %v, allowed %v", a, err, d.Allowed)
		}
		if sh.ops != ops+sweepEvery && sh.ops != 0 {
			t.Errorf("%s: the sampled check moved ops from %d to %d, want +%d (or a sweep)", a, ops, sh.ops, sweepEvery)
		}
	}
}

// findSlot returns the slot of the only state of sh.
func findSlot(t *testing.T, sh *shard) int {
	t.Helper()
	for i, s := range sh.slots {
		if s.e != nil {
			return i
		}
	}
	t.Fatal("no state stored")
	return -1
}
