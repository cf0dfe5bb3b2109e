package memstore

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestRecordTakesNoShardLock: a check that records
// on a stored state is decided under the state's own lock while another
// holds the shard's mutex, for every algorithm, except the one check in
// sweepEvery on the state that goes through the shard's lock for the
// sweep (recordOne), which counts sweepEvery checks towards the sweep.
// Which check that is depends on the state's hash, so on the store's
// random seed: the test reads the hash and counts with sampled, and when
// the next check is the sampled one it makes that check first, so every
// seed leaves sweepEvery-1 checks to record without the shard's lock.
func TestRecordTakesNoShardLock(t *testing.T) {
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		at := time.Unix(1_700_000_000, 0)
		s := newStore(t, Options{Now: func() time.Time { return at }, MaxKeys: 64, Shards: 1})
		l := sluice.Limit{Rate: 1000, Window: time.Minute, Algorithm: a}
		c := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: l}}, Cost: 1}
		var d sluice.Decision
		if err := s.Check(ctx, c, &d); err != nil || !d.Allowed {
			t.Fatalf("%s: first check: %v, allowed %v", a, err, d.Allowed)
		}
		used := 1
		sh := &s.shards[0]
		e, h := sh.slots[findSlot(t, sh)].e, sh.slots[findSlot(t, sh)].hash
		// sampledCheck makes the sampled check, which must count
		// sweepEvery checks towards the shard's sweep.
		sampledCheck := func() {
			t.Helper()
			ops := sh.ops
			if err := s.Check(ctx, c, &d); err != nil || !d.Allowed {
				t.Fatalf("%s: sampled check: %v, allowed %v", a, err, d.Allowed)
			}
			used++
			if sh.ops != ops+sweepEvery && sh.ops != 0 {
				t.Fatalf("%s: the sampled check moved ops from %d to %d, want +%d (or a sweep)", a, ops, sh.ops, sweepEvery)
			}
		}
		if sampled(e.seq, h) {
			sampledCheck()
		}
		want := 0
		for seq := e.seq; !sampled(seq, h); seq += seqOne {
			want++
		}
		if want != sweepEvery-1 && used == 2 {
			t.Fatalf("%s: %d checks to the next sampled one after a sampled one, want %d", a, want, sweepEvery-1)
		}
		sh.mu.Lock()
		for i := range want {
			done := make(chan error, 1)
			go func() {
				var d sluice.Decision
				err := s.Check(ctx, c, &d)
				if err == nil && (!d.Allowed || math.Abs(d.Hits[0].Used-float64(used+1)) > 1e-6) {
					err = fmt.Errorf("allowed %v, used %v, want %d", d.Allowed, d.Hits[0].Used, used+1)
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s: record %d of %d: %v", a, i, want, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: record %d of %d waited 10 s for the shard's lock", a, i, want)
			}
			used++
		}
		sh.mu.Unlock()
		if !sampled(e.seq, h) {
			t.Fatalf("%s: after %d checks without the shard's lock the next is not the sampled one", a, want)
		}
		sampledCheck()
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
