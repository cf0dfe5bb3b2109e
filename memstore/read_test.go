package memstore

import (
	"context"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestReadPathIsExclusivePath holds the read path (checks that record
// nothing, decided under the shard's shared lock) to the exclusive path:
// two stores on the same clock receive the same random traffic, one with
// every check forced through the exclusive path, and must return the same
// Decision, every field, after every check. Three keys share one shard so
// the shard's hint flips between denying and allowing keys; costs run from
// 0 (peeks) to the rate, some checks are shadow, and the clock moves by
// 0 to a whole window between checks, for every algorithm.
func TestReadPathIsExclusivePath(t *testing.T) {
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			var clock atomic.Int64
			clock.Store(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC).UnixMicro())
			now := func() time.Time { return time.UnixMicro(clock.Load()) }
			fast := newStore(t, Options{Now: now, MaxKeys: 64, Shards: 1})
			slow := newStore(t, Options{Now: now, MaxKeys: 64, Shards: 1})
			slow.slowOnly = true
			l := sluice.Limit{Rate: 7, Window: 2 * time.Second, Algorithm: a}
			keys := []string{"hot", "warm", "cold"}
			rng := rand.New(rand.NewPCG(11, uint64(len(a))))
			var fd, sd sluice.Decision
			reads := 0
			for i := range 30_000 {
				switch rng.IntN(4) {
				case 0:
					clock.Add(rng.Int64N(l.Window.Microseconds()))
				case 1:
					clock.Add(rng.Int64N(50_000))
				case 2:
					clock.Add(rng.Int64N(3))
				}
				k := keys[min(rng.IntN(5), 2)] // mostly "hot"
				lim := l
				lim.Shadow = rng.IntN(10) == 0
				c := sluice.Check{Hits: []sluice.Hit{{Zone: "z", Key: k, Limit: lim}}, Cost: rng.Int64N(l.Rate + 1)}
				if c.Cost > 1 && rng.IntN(2) == 0 {
					c.Cost = 1
				}
				if c.Cost == 0 || !lim.Shadow && fast.shards[0].denying.Load() != 0 {
					reads++ // the fast store tries the read path
				}
				if err := fast.Check(ctx, c, &fd); err != nil {
					t.Fatal(err)
				}
				if err := slow.Check(ctx, c, &sd); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(fd, sd) {
					t.Fatalf("check %d (key %s, cost %d, shadow %v): read path %+v, exclusive path %+v", i, k, c.Cost, lim.Shadow, fd, sd)
				}
			}
			if reads < 3_000 {
				t.Errorf("only %d of 30,000 checks tried the read path", reads)
			}
		})
	}
}

// TestReadPathConcurrent runs denials on the read path beside the
// exclusive path from several goroutines (go test -race checks the shared
// lock, the hint and the sweep counter): on a clock that does not move,
// each key admits exactly its rate, whatever the interleaving, for every
// algorithm.
func TestReadPathConcurrent(t *testing.T) {
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
