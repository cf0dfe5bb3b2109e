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

// TestAsyncFirstSightRecordGivesBackItsBudget: a first-sight record the
// store recorded whole, without creating the key (so no view is made),
// gives its cost back to the key's first-sight budget: the store holds
// it, and the key's checks are admitted locally again instead of asking
// the store (before, once FirstSight units were admitted in the sighting,
// every check asked it). A record refused spends the budget for the rest
// of the sighting: the over-admission stays what was unconfirmed when it
// was refused, within FirstSight.
func TestAsyncFirstSightRecordGivesBackItsBudget(t *testing.T) {
	store := newRedisStore(t, redistest.Standalone(t).URL())
	a := newAsync(t, store, edge.AsyncOptions{FirstSight: 2, SyncInterval: time.Hour})
	ctx := context.Background()
	flush := func() {
		t.Helper()
		if err := a.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Stored by another process: every record finds the key stored.
	back := check(1, hit("back", "10r/h", sluice.SlidingWindow))
	mustCheck(t, store, back)
	before := a.Stats()
	for i := range 6 {
		if d := mustCheck(t, a, back); !d.Allowed || d.Source != sluice.FromLocalView {
			t.Fatalf("check %d: %+v, want allowed on first sight", i+1, d)
		}
		if i%2 == 1 {
			flush() // two admissions, one record of both, recorded
		}
	}
	if s := a.Stats(); s.Sync != before.Sync || s.Unrecorded != 0 {
		t.Errorf("%d synchronous decisions and %d unrecorded, want 0 and 0: each record gave its cost back", s.Sync-before.Sync, s.Unrecorded)
	}
	if d := mustCheck(t, store, check(0, back.Hits...)); d.Hits[0].Used != 7 {
		t.Errorf("the store holds %v of the key, want 7: its own check and the 6 admitted here", d.Hits[0].Used)
	}

	// Full in the store: the record is refused (1 unit over the limit,
	// counted), and the sighting's budget is spent though 1 of 2 was
	// used: the store decides (denies), and its denial is the key's view.
	full := check(1, hit("full", "2r/h", sluice.SlidingWindow))
	mustCheck(t, store, full)
	mustCheck(t, store, full)
	if d := mustCheck(t, a, full); !d.Allowed || d.Source != sluice.FromLocalView {
		t.Fatalf("first sight of a full key: %+v, want allowed locally", d)
	}
	flush()
	before = a.Stats()
	for i := range 3 {
		if d := mustCheck(t, a, full); d.Allowed || (i == 0 && d.Source != sluice.FromStore) {
			t.Errorf("check %d after the refused record: %+v, want denied (the first by the store)", i+1, d)
		}
		flush()
	}
	s := a.Stats()
	if s.Unrecorded != 1 || s.Dropped != 0 {
		t.Errorf("%d unrecorded and %d dropped, want 1 (the refused first sight) and 0", s.Unrecorded, s.Dropped)
	}
	if s.Sync == before.Sync {
		t.Errorf("no synchronous decision after the refused record")
	}
}

// TestAsyncFirstSightRecordMakesTheView: a first-sight record that created
// its key in Redis (a sliding window not stored yet: a plain SET ... NX)
// is an answer, the store holding exactly its cost, so it becomes the
// key's view: the key's next checks, past its first-sight budget, are
// decided locally and flushed like any key with a view, without a
// synchronous store call (before, each asked the store). A record that
// found its key stored tells nothing of what else the store holds, so it
// makes no view: it gives its cost back to the key's first-sight budget
// (TestAsyncFirstSightRecordGivesBackItsBudget), and the key's next check
// is admitted on first sight again. No cost is lost: after Close the store
// holds every admission.
func TestAsyncFirstSightRecordMakesTheView(t *testing.T) {
	store := newRedisStore(t, redistest.Standalone(t).URL())
	a := newAsync(t, store, edge.AsyncOptions{FirstSight: 1, SyncInterval: time.Hour})
	ctx := context.Background()
	c := check(1, hit("made", "10r/h", sluice.SlidingWindow))
	if d := mustCheck(t, a, c); !d.Allowed || d.Source != sluice.FromLocalView {
		t.Fatalf("first check: %+v, want allowed on first sight", d)
	}
	if err := a.Flush(ctx); err != nil { // sends the record: the key is made
		t.Fatal(err)
	}
	before := a.Stats()
	for i := range 4 {
		if d := mustCheck(t, a, c); !d.Allowed || d.Source != sluice.FromLocalView {
			t.Fatalf("check %d after the record: %+v, want allowed from the local view", i+2, d)
		}
	}
	if s := a.Stats(); s.Sync != before.Sync || s.Local != before.Local+4 {
		t.Errorf("after the record: %d synchronous and %d local decisions, want 0 and 4", s.Sync-before.Sync, s.Local-before.Local)
	}

	// Stored already (another process's check): the record adds to it and
	// says nothing of what else is there, so it makes no view; it gives its
	// cost back to the budget: the next check is a first sight again, the
	// one after it, past the budget, asks the store with the record.
	old := check(1, hit("old", "10r/h", sluice.SlidingWindow))
	mustCheck(t, store, old)
	mustCheck(t, a, old) // first sight
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d := mustCheck(t, a, old); !d.Allowed || d.Source != sluice.FromLocalView {
		t.Errorf("check of a key the record found stored: %+v, want allowed on first sight (the record gave its cost back)", d)
	}
	if d := mustCheck(t, a, old); !d.Allowed || d.Source != sluice.FromStore || d.Hits[0].Used != 4 {
		t.Errorf("check past the budget: %+v, want allowed by the store, 4 used", d)
	}

	// Admitted on first sight in two rounds: the second record found the
	// key stored, so nothing says what else the store holds; it gives its
	// cost back (the first, which created the key, is spent: its view
	// mark was cleared by the second admission). One more first sight,
	// then the store.
	b := newAsync(t, newRedisStore(t, redistest.Standalone(t).URL()), edge.AsyncOptions{FirstSight: 2, SyncInterval: time.Hour})
	two := check(1, hit("two", "10r/h", sluice.SlidingWindow))
	for range 2 {
		if d := mustCheck(t, b, two); d.Source != sluice.FromLocalView {
			t.Fatalf("first sight: %+v, want local", d)
		}
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if d := mustCheck(t, b, two); d.Source != sluice.FromLocalView {
		t.Errorf("check after a record that found the key stored: %+v, want allowed on first sight", d)
	}
	if d := mustCheck(t, b, two); d.Source != sluice.FromStore || d.Hits[0].Used != 4 {
		t.Errorf("check past the budget: %+v, want decided by the store, 4 used", d)
	}

	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if d := mustCheck(t, store, check(0, c.Hits...)); d.Hits[0].Used != 5 {
		t.Errorf("the store holds %v of the made key, want 5: the record and 4 local admissions, flushed by Close", d.Hits[0].Used)
	}
	if s := a.Stats(); s.Unrecorded != 0 || s.Dropped != 0 || s.Pending != 0 {
		t.Errorf("stats %+v, want nothing unrecorded, dropped or pending", s)
	}
}
