package edge_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

// offerHot offers hot keys far more than their limit (100r/s each) for 10
// windows: callers goroutines, each checking every 2 ms, through
// the limiter that procs returns for caller g (a process of the fleet), and
// returns the count admitted. It runs in a synctest bubble.
func offerHot(t *testing.T, algo sluice.Algorithm, callers int, proc func(g int) sluice.Limiter) int64 {
	t.Helper()
	const keys = 5
	var admitted atomicInt
	var wg sync.WaitGroup
	start := time.Now()
	for g := range callers {
		l := proc(g)
		wg.Go(func() {
			n := int64(0)
			for i := 0; time.Since(start) < 10*time.Second; i++ {
				c := check(1, hit(fmt.Sprint("hot-", (g+i)%keys), "100r/s", algo))
				if mustCheck(t, l, c).Allowed {
					n++
				}
				time.Sleep(2 * time.Millisecond)
			}
			admitted.Add(n)
		})
	}
	wg.Wait()
	return admitted.Load()
}

// TestAsyncAdmitsWhatTheStoreAdmits: keys offered far more than their
// limit get from an Async limiter (one process, and a fleet of 3 sharing
// the store with Processes 3, its traffic spread unevenly) at least 97% of
// what the store alone admits under the same traffic, and no more than the
// stated over-admission bound. A false denial (a local denial while the
// store would allow) loses admission here.
func TestAsyncAdmitsWhatTheStoreAdmits(t *testing.T) {
	for _, algo := range []sluice.Algorithm{sluice.SlidingWindow, sluice.Log, sluice.GCRA, sluice.Buckets, sluice.Decay} {
		for _, n := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/processes-%d", algo, n), func(t *testing.T) {
				var sync, async int64
				var unrecorded uint64
				synctest.Test(t, func(t *testing.T) {
					f := newFlaky(t, nil)
					sync = offerHot(t, algo, 8, func(int) sluice.Limiter { return f })
				})
				synctest.Test(t, func(t *testing.T) {
					f := newFlaky(t, nil)
					fleet := make([]*edge.Async, n)
					for i := range fleet {
						fleet[i] = newAsync(t, f, edge.AsyncOptions{Processes: n})
					}
					// Process 0 takes half the callers, the others share the rest.
					async = offerHot(t, algo, 8, func(g int) sluice.Limiter { return fleet[min(g/(8/n+1), n-1)] })
					for _, a := range fleet {
						unrecorded += a.Stats().Unrecorded
					}
				})
				ratio := float64(async) / float64(sync)
				t.Logf("%s, %d process(es): the store admitted %d, async %d (%.3fx), %d unrecorded", algo, n, sync, async, ratio, unrecorded)
				if ratio < 0.97 {
					t.Errorf("async admitted %.3fx what the store admits, want >= 0.97x", ratio)
				}
				if over := async - sync; over > int64(unrecorded)+5 {
					t.Errorf("async admitted %d more than the store, but counted %d unrecorded", over, unrecorded)
				}
			})
		}
	}
}
