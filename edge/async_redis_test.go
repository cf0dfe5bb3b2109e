package edge_test

import (
	"context"
	"fmt"
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
// over-admission; it must stay within N × ceil(Rate / Processes), and it
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
			bound := int64(n * ((rate + processes - 1) / processes))
			t.Logf("N=%d processes, Processes option %d, sync interval %v: %d checks in %v, %d admitted for a limit of %d: over-admission %d (%.1f%% of the limit), bound N*ceil(Rate/Processes) = %d; store recorded %v, unrecorded %d, dropped %d, %d flush rounds",
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

// TestAsyncFirstSightBoundOnRedis is TestAsyncFirstSightBound over a real
// Redis through the batch record path (RecordBatch: pipelined SET ... NX
// for new sliding windows, record.lua for the others): N = 3 processes
// with FirstSight 2 over 40 keys of 5r/h, half of them filled beforehand by
// another process. A filled key gets at most N·FirstSight; a new key at
// most its limit + N·FirstSight + N·ceil(Rate/Processes) (the whole bound:
// a view taken while other processes' first-sight cost is unsent lets
// each admit its share of it again) and at least its limit; every unit
// admitted beyond the limit is counted Unrecorded, and the store holds
// exactly each key's limit.
func TestAsyncFirstSightBoundOnRedis(t *testing.T) {
	url := redistest.Standalone(t).URL()
	const (
		n     = 3
		first = 2
		keys  = 40
	)
	for _, algo := range []sluice.Algorithm{sluice.SlidingWindow, sluice.Log} {
		t.Run(string(algo), func(t *testing.T) {
			c := func(k int) sluice.Check { return check(1, hit(fmt.Sprint(t.Name(), "-", k), "5r/h", algo)) }
			filler := newRedisStore(t, url)
			for k := range keys / 2 {
				for range 5 {
					mustCheck(t, filler, c(k))
				}
			}
			fleet := make([]*edge.Async, n)
			for i := range fleet {
				fleet[i] = newAsync(t, newRedisStore(t, url), edge.AsyncOptions{FirstSight: first, Processes: n, SyncInterval: 20 * time.Millisecond})
			}
			admitted := make([]atomic.Int64, keys)
			var wg sync.WaitGroup
			for _, a := range fleet {
				for k := range keys {
					wg.Go(func() {
						var d sluice.Decision
						for range 12 {
							if err := a.Check(context.Background(), c(k), &d); err != nil {
								t.Error(err)
								return
							}
							if d.Allowed {
								admitted[k].Add(1)
							}
						}
					})
				}
			}
			wg.Wait()
			var unrecorded, dropped, firstSight uint64
			for _, a := range fleet {
				if err := a.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				s := a.Stats()
				unrecorded, dropped, firstSight = unrecorded+s.Unrecorded, dropped+s.Dropped, firstSight+s.FirstSight
			}
			var over int64
			for k := range keys {
				got, limit := admitted[k].Load(), int64(5)
				if k < keys/2 {
					limit = 0
				}
				bound := limit + n*first
				if k >= keys/2 {
					bound += n * ((5 + n - 1) / n)
				}
				if got > bound {
					t.Errorf("key %d: admitted %d, want at most %d (limit %d)", k, got, bound, limit)
				}
				if k >= keys/2 && got < limit {
					t.Errorf("new key %d: admitted %d, want the limit %d", k, got, limit)
				}
				if stored := used(t, filler, c(k)); stored != 5 {
					t.Errorf("key %d: the store holds %v, want the limit 5", k, stored)
				}
				over += max(0, got-limit)
			}
			t.Logf("over-admission %d over %d keys (bound per key: N·FirstSight = %d on a filled key, + N·ceil(Rate/Processes) = %d on a new one), %d unrecorded, %d dropped, %d first-sight admissions",
				over, keys, n*first, n*first+n*((5+n-1)/n), unrecorded, dropped, firstSight)
			if uint64(over) != unrecorded+dropped {
				t.Errorf("over-admission %d, but %d counted unrecorded and %d dropped", over, unrecorded, dropped)
			}
			if firstSight == 0 {
				t.Errorf("no first-sight admission counted")
			}
		})
	}
}
