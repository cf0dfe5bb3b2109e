package memstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestConcurrentChecksExact runs recording checks and peeks on keys that
// share shards from several goroutines (go test -race checks the shard
// locks and the sweep counter): on a clock that does not move, each key
// admits exactly its rate, whatever the interleaving, for every algorithm.
func TestConcurrentChecksExact(t *testing.T) {
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			at := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
			s := newStore(t, Options{Now: func() time.Time { return at }, MaxKeys: 64, Shards: 2})
			l := sluice.Limit{Rate: 5, Window: time.Minute, Algorithm: a}
			keys := []string{"a", "b", "c"}
			var allowed [3]atomic.Int64
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					var d sluice.Decision
					for i := range 500 {
						k := (g + i) % len(keys)
						c := sluice.Check{Hits: []sluice.Hit{{Key: keys[k], Limit: l}}, Cost: int64(i % 2)}
						if err := s.Check(ctx, c, &d); err != nil {
							t.Error(err)
							return
						}
						if d.Allowed && c.Cost > 0 {
							allowed[k].Add(1)
						}
					}
				})
			}
			wg.Wait()
			for k := range keys {
				if n := allowed[k].Load(); n != l.Rate {
					t.Errorf("key %s: %d allowed, want exactly %d", keys[k], n, l.Rate)
				}
			}
		})
	}
}

// TestConcurrentRecordsExact: checks that record on stored states (under
// the states' own locks, see recordOne), two-hit
// checks on the same states (under the shard's lock and both states'),
// and a goroutine inserting and resetting other keys of the same shard
// (growing, shifting and rebuilding its table) run at once: on a clock
// that does not move, each key admits exactly its rate, for every
// algorithm.
func TestConcurrentRecordsExact(t *testing.T) {
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			at := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
			s := newStore(t, Options{Now: func() time.Time { return at }, MaxKeys: 1 << 16, Shards: 1})
			l := sluice.Limit{Rate: 500, Window: time.Hour, Algorithm: a}
			keys := []string{"a", "b", "c"}
			var allowed [3]atomic.Int64
			var wg sync.WaitGroup
			stop := make(chan struct{})
			wg.Go(func() {
				var d sluice.Decision
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					c := sluice.Check{Hits: []sluice.Hit{{Key: fmt.Sprint("churn-", i%300), Limit: l}}, Cost: 1}
					if err := s.Check(ctx, c, &d); err != nil {
						t.Error(err)
						return
					}
					if i%2 == 0 {
						if err := s.Reset(ctx, c); err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
			var checkers sync.WaitGroup
			for g := range 4 {
				checkers.Go(func() {
					var d sluice.Decision
					for i := range 1500 {
						k, k2 := (g+i)%len(keys), (g+i+1)%len(keys)
						hits := []sluice.Hit{{Key: keys[k], Limit: l}}
						if i%4 == 3 {
							hits = append(hits, sluice.Hit{Key: keys[k2], Limit: l})
						}
						if err := s.Check(ctx, sluice.Check{Hits: hits, Cost: 1}, &d); err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							allowed[k].Add(1)
							if len(hits) == 2 {
								allowed[k2].Add(1)
							}
						}
					}
				})
			}
			checkers.Wait()
			close(stop)
			wg.Wait()
			for k := range keys {
				if n := allowed[k].Load(); n != l.Rate {
					t.Errorf("key %s: %d allowed, want exactly %d", keys[k], n, l.Rate)
				}
			}
		})
	}
}
