package memstore

import (
	"context"
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
