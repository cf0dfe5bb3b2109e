package memstore

import (
	"context"
	"math/rand/v2"
	"reflect"
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
