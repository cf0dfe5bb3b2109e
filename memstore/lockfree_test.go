package memstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/ident"
)

// TestLockFreeMatchesLocked is a stress test of the paths that decide
// without the shard's lock (peek, recordOne) against the locked
// computation, algo.Decide. Goroutines check a few hot keys of one shard
// at once, by single-hit checks of cost 1 and 0 and by two-hit checks
// (the workset path, under the shard's lock), while another inserts and
// resets keys of that shard (growing, shifting and rebuilding its table).
// The clock does not move, so whatever the interleaving each key's state
// after n admissions is the one algo.Decide reaches after n unit records,
// and every decision must be, field for field, the one algo.Decide gives
// at some n: an admission at n for each n below the rate exactly once, a
// denial only at the rate, and a cost-0 check at an n that never goes
// back for one goroutine. It asserts nothing about timing, and its work
// is a fixed number of checks.
func TestLockFreeMatchesLocked(t *testing.T) {
	const (
		rate    = 700 // a GCRA interval of 85,714.28 µs: both of its words change
		keys    = 4
		workers = 4
		checks  = 4000 // per worker: twice keys×rate, so about half are denials
	)
	for _, a := range sluice.Algorithms() {
		t.Run(string(a)+"/interleaved", func(t *testing.T) { interleaved(t, a) })
		t.Run(string(a)+"/stress", func(t *testing.T) {
			at := time.Unix(1_700_000_000, 0)
			s := newStore(t, Options{Now: func() time.Time { return at }, MaxKeys: 1 << 20, Shards: 1})
			l := sluice.Limit{Rate: rate, Window: time.Minute, Algorithm: a}
			wide := sluice.Limit{Rate: 1_000_000, Window: time.Hour} // never denies: the two-hit checks admit by l alone
			allowed, denied, peeks := lockedOutcomes(a, l, at.UnixMicro())
			ctx := context.Background()
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var churnErr error
			go func() { // churn: the table changes shape under the readers
				defer close(stop)
				var d sluice.Decision
				for i := range 5000 {
					c := sluice.Check{Hits: []sluice.Hit{{Key: fmt.Sprint("churn-", i), Limit: l}}, Cost: 1}
					if churnErr = s.Check(ctx, c, &d); churnErr != nil {
						return
					}
					if i%3 != 0 {
						if churnErr = s.Reset(ctx, c); churnErr != nil {
							return
						}
					}
				}
			}()
			// got[w][k] lists, in order, the n each decision of worker w
			// on key k was taken at; admits counts admissions per n.
			type seen struct{ admitted, peeked []int }
			got := make([][keys]seen, workers)
			errs := make(chan error, workers)
			for w := range workers {
				wg.Go(func() {
					var d sluice.Decision
					for i := range checks {
						k := (w + i) % keys
						hit := sluice.Hit{Key: fmt.Sprint("hot-", k), Limit: l}
						c := sluice.Check{Hits: []sluice.Hit{hit}, Cost: 1}
						switch i % 4 {
						case 1:
							c.Cost = 0
						case 2:
							c.Hits = append(c.Hits, sluice.Hit{Key: hit.Key, Limit: wide})
						}
						if err := s.Check(ctx, c, &d); err != nil {
							errs <- err
							return
						}
						r := d.Hits[0]
						switch {
						case c.Cost == 0:
							n := indexOf(peeks, r)
							if n < 0 {
								errs <- fmt.Errorf("worker %d check %d: cost-0 result %+v is no locked one", w, i, r)
								return
							}
							got[w][k].peeked = append(got[w][k].peeked, n)
						case r.Allowed:
							n := indexOf(allowed, r)
							if n < 0 {
								errs <- fmt.Errorf("worker %d check %d: admission %+v is no locked one", w, i, r)
								return
							}
							got[w][k].admitted = append(got[w][k].admitted, n)
						case r != denied:
							errs <- fmt.Errorf("worker %d check %d: denial %+v, the locked one is %+v", w, i, r, denied)
							return
						}
					}
				})
			}
			wg.Wait()
			<-stop
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if churnErr != nil {
				t.Fatal(churnErr)
			}
			for k := range keys {
				admits := make([]int, rate)
				for w := range workers {
					for _, n := range got[w][k].admitted {
						admits[n]++
					}
					last := 0
					for _, n := range got[w][k].peeked {
						if n < last {
							t.Fatalf("key %d, worker %d: a cost-0 check saw %d admissions after one saw %d", k, w, n, last)
						}
						last = n
					}
				}
				for n, c := range admits {
					if c != 1 {
						t.Fatalf("key %d: %d admissions at %d admitted before, want exactly 1", k, c, n)
					}
				}
			}
		})
	}
}

// lockedOutcomes returns what algo.Decide answers one unit check on a
// state of limit l at a still clock now after n unit admissions: the
// admission for each n below the rate, the denial at the rate, and a
// cost-0 check for each n up to the rate, as a single-hit check reports
// them.
func lockedOutcomes(a sluice.Algorithm, l sluice.Limit, now int64) (allowed []sluice.HitResult, denied sluice.HitResult, peeks []sluice.HitResult) {
	table, _ := ident.Lookup(string(a))
	st := table.New()
	result := func(cost int64) sluice.HitResult { return lockedResult(l, st, now, cost) }
	for range l.Rate {
		peeks = append(peeks, result(0))
		allowed = append(allowed, result(1))
	}
	return allowed, result(1), append(peeks, result(0))
}

// indexOf returns the index of r in rs, or -1.
func indexOf(rs []sluice.HitResult, r sluice.HitResult) int {
	for i := range rs {
		if rs[i] == r {
			return i
		}
	}
	return -1
}

// lockedResult is algo.Decide's answer, as a single-hit check reports
// it, to a check of cost on st, a state of limit l, at now; st records
// the check if it is allowed.
func lockedResult(l sluice.Limit, st algo.State, now, cost int64) sluice.HitResult {
	p := algo.Params{Rate: l.Rate, Window: l.Window.Microseconds(), Bucket: l.Bucket().Microseconds()}
	out := make([]algo.Outcome, 1)
	algo.Decide([]algo.Hit{{State: st, Params: p}}, out, now, cost)
	o := out[0]
	return sluice.HitResult{Allowed: o.Allowed, Used: o.Used, Remaining: algo.Remaining(l.Rate, o.Used),
		RetryAfter: time.Duration(o.RetryAfter) * time.Microsecond, ResetAfter: time.Duration(o.ResetAfter) * time.Microsecond}
}
