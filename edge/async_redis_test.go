package edge_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

func newRedisStore(t testing.TB, url string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Dial(url, redisstore.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("redisstore.Dial(%q): %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestAsyncOverAdmissionBound is the accuracy bound of the package doc,
// measured: N = 4 Async limiters (each with its own Redis store and
// connection, as 4 processes would have) over one real Redis, 16 callers
// each on one hot key whose window outlasts the test, so the store itself
// admits exactly Rate. Whatever is admitted beyond Rate is the async mode's
// over-admission; it must stay within N × floor(Rate / Processes), and it
// must equal what the store refused to record (AsyncStats.Unrecorded):
// every admitted unit is either recorded or counted.
func TestAsyncOverAdmissionBound(t *testing.T) {
	url := redistest.Standalone(t).URL()
	const (
		n        = 4
		callers  = 16
		rate     = 1000
		interval = 50 * time.Millisecond
	)
	for _, processes := range []int{1, n} {
		t.Run(map[int]string{1: "share-1", n: "share-n"}[processes], func(t *testing.T) {
			h := hit("hot-"+t.Name(), "1000r/h", sluice.Log)
			c := check(1, h)
			var admitted, checks atomic.Int64
			limiters := make([]*edge.Async, n)
			for i := range limiters {
				limiters[i] = newAsync(t, newRedisStore(t, url), edge.AsyncOptions{SyncInterval: interval, Processes: processes})
			}
			start := time.Now()
			var wg sync.WaitGroup
			for _, a := range limiters {
				for range callers {
					wg.Go(func() {
						var d sluice.Decision
						for time.Since(start) < time.Second {
							if err := a.Check(context.Background(), c, &d); err != nil {
								t.Error(err)
								return
							}
							checks.Add(1)
							if d.Allowed {
								admitted.Add(1)
							}
						}
					})
				}
			}
			wg.Wait()
			elapsed := time.Since(start)
			var unrecorded, dropped uint64
			var flushes uint64
			var worstFlush time.Duration
			for _, a := range limiters {
				if err := a.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				s := a.Stats()
				unrecorded += s.Unrecorded
				dropped += s.Dropped
				flushes += s.Flushes
				worstFlush = max(worstFlush, s.LastFlush)
			}
			store := newRedisStore(t, url)
			recorded := used(t, store, c)
			over := admitted.Load() - rate
			bound := int64(n * (rate / processes))
			t.Logf("N=%d processes, Processes option %d, sync interval %v: %d checks in %v, %d admitted for a limit of %d: over-admission %d (%.1f%% of the limit), bound N*floor(Rate/Processes) = %d; store recorded %v, unrecorded %d, dropped %d, %d flush rounds",
				n, processes, interval, checks.Load(), elapsed.Round(time.Millisecond), admitted.Load(), rate, over, 100*float64(over)/rate, bound, recorded, unrecorded, dropped, flushes)
			if recorded != rate {
				t.Errorf("the store recorded %v, want the limit %d (the test should fill the key)", recorded, rate)
			}
			if over < 0 || over > bound {
				t.Errorf("over-admission %d, want 0 to %d", over, bound)
			}
			if uint64(over) != unrecorded+dropped {
				t.Errorf("over-admission %d, but the limiters counted %d unrecorded + %d dropped", over, unrecorded, dropped)
			}
		})
	}
}
