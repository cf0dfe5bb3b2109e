package memstore

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestDenialTakesNoLock: a check denied by a state over its limit is
// decided while another holds the shard's mutex, for every algorithm: by
// peek, or for the log and buckets (which peek does not read) under the
// state's own lock by recordOne. The one check in sweepEvery that
// recordOne sends through the shard's lock depends on the store's random
// seed: when the next check is that one, the test makes it first.
func TestDenialTakesNoLock(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		at := time.Unix(1_700_000_000, 0)
		s := newStore(t, Options{Now: func() time.Time { return at }, MaxKeys: 64, Shards: 1})
		c := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: sluice.Limit{Rate: 3, Window: time.Minute, Algorithm: a}}}, Cost: 1}
		var d sluice.Decision
		for i := range 5 { // three allowed, then denials under the lock set the hint
			if err := s.Check(context.Background(), c, &d); err != nil || d.Allowed != (i < 3) {
				t.Fatalf("%s: check %d: %v, allowed %v", a, i, err, d.Allowed)
			}
		}
		want := d
		want.Hits = append([]sluice.HitResult(nil), d.Hits...)
		sh := &s.shards[0]
		slot := sh.slots[findSlot(t, sh)]
		if slot.e.stateWords() == nil && sampled(atomic.LoadUint32(&slot.e.seq), slot.hash) {
			if err := s.Check(context.Background(), c, &d); err != nil || d.Allowed {
				t.Fatalf("%s: sampled check: %v, allowed %v", a, err, d.Allowed)
			}
		}
		sh.mu.Lock()
		done := make(chan error, 1)
		go func() {
			var d sluice.Decision
			err := s.Check(context.Background(), c, &d)
			if err == nil && !reflect.DeepEqual(d, want) {
				err = fmt.Errorf("decision %+v, want %+v", d, want)
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", a, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: a denial waited 10 s for the shard's lock", a)
		}
		sh.mu.Unlock()
	}
}

// TestPeekUnderChurn runs lock-free denials of keys over their limit
// while another goroutine inserts and resets keys of the same shard
// (growing the table, shifting entries back, rebuilding it): every
// denial must be the one the locked path gave before, on a clock that
// does not move.
func TestPeekUnderChurn(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			at := time.Unix(1_700_000_000, 0)
			s := newStore(t, Options{Now: func() time.Time { return at }, MaxKeys: 1 << 20, Shards: 1})
			l := sluice.Limit{Rate: 3, Window: time.Minute, Algorithm: a}
			ctx := context.Background()
			hot := []string{"hot-a", "hot-b", "hot-c"}
			want := make([]sluice.Decision, len(hot))
			for i, k := range hot {
				c := sluice.Check{Hits: []sluice.Hit{{Key: k, Limit: l}}, Cost: 1}
				for range 5 {
					if err := s.Check(ctx, c, &want[i]); err != nil {
						t.Fatal(err)
					}
				}
				if want[i].Allowed {
					t.Fatalf("%s: not denied after 5 checks", k)
				}
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			wg.Go(func() {
				defer close(stop)
				var d sluice.Decision
				for i := range 20_000 {
					k := fmt.Sprintf("churn-%d", i)
					c := sluice.Check{Hits: []sluice.Hit{{Key: k, Limit: l}}, Cost: 1}
					if err := s.Check(ctx, c, &d); err != nil {
						t.Error(err)
						return
					}
					if i%3 != 0 {
						if err := s.Reset(ctx, c); err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
			for g := range 2 {
				wg.Go(func() {
					var d sluice.Decision
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						k := (g + i) % len(hot)
						c := sluice.Check{Hits: []sluice.Hit{{Key: hot[k], Limit: l}}, Cost: 1}
						if err := s.Check(ctx, c, &d); err != nil {
							t.Error(err)
							return
						}
						if !reflect.DeepEqual(d, want[k]) {
							t.Errorf("check %d on %s: %+v, want %+v", i, hot[k], d, want[k])
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestPeekSeesWholeStates runs peeks (cost 0, decided without the lock)
// while another goroutine records on the same state, through single-hit
// checks and two-hit checks (algo.Decide's path), on a clock that does
// not move: each reader must see the usage only grow, by whole units,
// never past what was recorded, and the last peek see every record. (A
// smoke test of the entries' sequence locks under the two paths that
// record; TestPeekIsLocked holds the decision itself to the locked one.)
func TestPeekSeesWholeStates(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			at := time.Unix(1_700_000_000, 0)
			s := newStore(t, Options{Now: func() time.Time { return at }, MaxKeys: 64, Shards: 1})
			l := sluice.Limit{Rate: 1000, Window: time.Hour, Algorithm: a}
			ctx := context.Background()
			hit := sluice.Hit{Key: "k", Limit: l}
			other := sluice.Hit{Key: "other", Limit: sluice.Limit{Rate: 1000, Window: time.Hour}}
			if err := s.Check(ctx, sluice.Check{Hits: []sluice.Hit{hit}, Cost: 1}, new(sluice.Decision)); err != nil {
				t.Fatal(err)
			}
			const records = 600
			var wg sync.WaitGroup
			stop := make(chan struct{})
			wg.Go(func() {
				defer close(stop)
				var d sluice.Decision
				for i := range records - 1 {
					hits := []sluice.Hit{hit}
					if i%2 == 0 {
						hits = append(hits, other)
					}
					if err := s.Check(ctx, sluice.Check{Hits: hits, Cost: 1}, &d); err != nil || !d.Allowed {
						t.Errorf("record %d: %v, allowed %v", i, err, d.Allowed)
						return
					}
				}
			})
			for range 2 {
				wg.Go(func() {
					var d sluice.Decision
					last := 0.0
					for done := false; !done; {
						select {
						case <-stop:
							done = true // one more peek after the last record
						default:
						}
						if err := s.Check(ctx, sluice.Check{Hits: []sluice.Hit{hit}}, &d); err != nil {
							t.Error(err)
							return
						}
						u := d.Hits[0].Used
						if u < last || u > records || math.Abs(u-math.Round(u)) > 1e-6 {
							t.Errorf("usage %v after %v (at most %d, whole units)", u, last, records)
							return
						}
						last = u
					}
					if math.Round(last) != records {
						t.Errorf("last usage seen %v, want %d", last, records)
					}
				})
			}
			wg.Wait()
		})
	}
}
