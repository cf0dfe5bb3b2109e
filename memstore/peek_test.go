package memstore

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/ident"
)

// TestPeekIsLocked holds peek, the decision without a lock, to the locked
// path's: for every algorithm, on random traffic (costs 0–3, shadow and
// not, a clock that jumps by up to a window), before each check peek
// evaluates the stored state (its hint forced on) and, whenever it
// answers, its outcome must be decideOne's at the same instant, and
// decideOne must record nothing. For the algorithms peek reads (those
// with stateWords) it must answer for denials and peeks, since a peek
// that never answered would pass vacuously; for the others, never.
func TestPeekIsLocked(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			at := time.Unix(1_700_000_000, 0)
			s := newStore(t, Options{Now: func() time.Time { return at }, MaxKeys: 64, Shards: 1})
			l := sluice.Limit{Rate: 20, Window: 10 * time.Second, Algorithm: a}
			p := algo.Params{Rate: l.Rate, Window: l.Window.Microseconds(), Bucket: l.Bucket().Microseconds()}
			k := stateKey{State: ident.State{Zone: "z", Key: "k", Limit: ident.LimitOf(string(a), l.Window, l.Bucket())}}
			kh := s.keyHash("", "z", "k")
			sh, h := &s.shards[kh&s.mask], stateHash(kh, &k)
			rng := rand.New(rand.NewPCG(11, 12))
			answered := map[bool]int{}
			var d sluice.Decision
			for i := range 20_000 {
				at = at.Add(time.Duration(rng.Int64N(int64(l.Window) / 20)))
				if rng.IntN(200) == 0 {
					at = at.Add(l.Window)
				}
				cost, shadow := rng.Int64N(4), rng.IntN(10) == 0
				if e := sh.find(h, &k); e != nil {
					atomic.OrUint32(&e.seq, seqDenied)
					if _, seq, got, done := sh.peek(h, &k, p, shadow, at.UnixMicro(), cost); done {
						if seq != sh.seq {
							t.Fatalf("check %d: peek answered under seq %d, the shard's is %d", i, seq, sh.seq)
						}
						var want algo.Outcome
						allowed := decideOne(e, p, shadow, &want, at.UnixMicro(), cost)
						if allowed && cost > 0 || got != want {
							t.Fatalf("check %d (cost %d, shadow %v): peek %+v, locked %+v (records: %v)", i, cost, shadow, got, want, allowed && cost > 0)
						}
						answered[cost == 0]++
					}
				}
				c := sluice.Check{Hits: []sluice.Hit{{Zone: "z", Key: "k", Limit: l}}, Cost: cost, Shadow: shadow}
				if err := s.Check(context.Background(), c, &d); err != nil {
					t.Fatal(err)
				}
			}
			if newEntry(k.Limit.Code).stateWords() == nil {
				if answered[false]+answered[true] > 0 {
					t.Fatalf("peek answered %d denials and %d peeks of a state it does not read", answered[false], answered[true])
				}
				return
			}
			if answered[false] < 1000 || answered[true] < 1000 {
				t.Fatalf("peek answered %d denials and %d peeks of 20,000 checks: too few to test it", answered[false], answered[true])
			}
		})
	}
}
