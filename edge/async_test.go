package edge_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

func newAsync(t testing.TB, next sluice.Limiter, opts edge.AsyncOptions) *edge.Async {
	t.Helper()
	a, err := edge.NewAsync(next, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	return a
}

// used returns the usage the store has recorded on c's first hit.
func used(t testing.TB, l sluice.Limiter, c sluice.Check) float64 {
	t.Helper()
	c.Cost = 0
	return mustCheck(t, l, c).Hits[0].Used
}

func TestAsyncDecidesLocallyAndSyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: 100 * time.Millisecond})
		c := check(1, hit("k", "10r/h", sluice.Log))
		for i := range 3 {
			if d := mustCheck(t, a, c); !d.Allowed || d.Source != sluice.FromStore {
				t.Fatalf("check %d: %+v, want allowed by the store (no view yet)", i+1, d)
			}
		}
		calls := f.calls.Load()
		for i := 4; i <= 5; i++ {
			d := mustCheck(t, a, c)
			if !d.Allowed || d.Source != sluice.FromLocalView {
				t.Fatalf("check %d: %+v, want allowed from the local view", i, d)
			}
			if got, want := d.Hits[0].Remaining, int64(10-i); got != want {
				t.Errorf("check %d: Remaining %d, want %d", i, got, want)
			}
		}
		if f.calls.Load() != calls {
			t.Fatalf("local decisions called the store")
		}
		if got := used(t, f.next, c); got != 3 {
			t.Errorf("store's usage before the sync: %v, want 3", got)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := used(t, f.next, c); got != 5 {
			t.Errorf("store's usage after one interval: %v, want 5", got)
		}
		if got := f.calls.Load() - calls; got != 1 {
			t.Errorf("%d store calls for one key's pending cost, want 1", got)
		}
		s := a.Stats()
		if s.Local != 2 || s.Sync != 3 || s.Pending != 0 || s.Flushes != 1 || s.Keys != 1 {
			t.Errorf("stats %+v", s)
		}
	})
}

// TestAsyncDeniesLocallyAtTheView: a key whose budget is spent is asked of
// the store together with its unsent cost, which is then sent at once, and
// the store's denial is repeated locally while it stands.
func TestAsyncDeniesLocallyAtTheView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: time.Second})
		c := check(1, hit("k", "5r/h", sluice.Log))
		for range 5 {
			if d := mustCheck(t, a, c); !d.Allowed {
				t.Fatalf("denied %+v within the limit", d)
			}
		}
		d := mustCheck(t, a, c)
		if i, _ := d.Denier(); d.Allowed || d.Source != sluice.FromStore || i != 0 || d.RetryAfter() <= 0 {
			t.Fatalf("6th check: %+v, want denied by the store with a RetryAfter", d)
		}
		synctest.Wait()
		if got := used(t, f.next, c); got != 5 {
			t.Errorf("store's usage: %v, want the 5 admitted, sent after the denial", got)
		}
		calls := f.calls.Load()
		d = mustCheck(t, a, c)
		if d.Allowed || d.Source != sluice.FromLocalView || d.RetryAfter() <= 0 {
			t.Fatalf("7th check: %+v, want denied from the local view with a RetryAfter", d)
		}
		if got := f.calls.Load() - calls; got != 0 {
			t.Errorf("%d store calls while the store's denial stands, want 0", got)
		}
	})
}

func TestAsyncCloseSendsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a, err := edge.NewAsync(f, edge.AsyncOptions{SyncInterval: 30 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for k := range 50 {
			wg.Go(func() {
				c := check(1, hit(fmt.Sprint("k", k), "1000r/h", sluice.Log))
				for range 20 {
					mustCheck(t, a, c)
				}
			})
		}
		wg.Wait()
		if err := a.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for k := range 50 {
			if got := used(t, f.next, check(1, hit(fmt.Sprint("k", k), "1000r/h", sluice.Log))); got != 20 {
				t.Errorf("key %d: store's usage %v after Close, want 20", k, got)
			}
		}
		if d := mustCheck(t, a, check(1, hit("k0", "1000r/h", sluice.Log))); d.Source != sluice.FromStore {
			t.Errorf("after Close: source %v, want the store", d.Source)
		}
	})
}

// TestAsyncStoreFailure: while the store fails, checks are still decided
// from the views, the cost stays owed and is sent when the store is back;
// once a view is older than MaxViewAge, checks go to the store, here a
// Guard that applies its failure policy.
func TestAsyncStoreFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		g := newGuard(t, f, edge.GuardOptions{Policy: edge.PolicyClosed})
		a := newAsync(t, g, edge.AsyncOptions{SyncInterval: 100 * time.Millisecond, MaxViewAge: time.Second})
		c := check(1, hit("k", "100r/h", sluice.Log))
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		mustCheck(t, a, c) // the third answer makes the view
		f.set(refuse)
		for range 10 {
			if d := mustCheck(t, a, c); !d.Allowed || d.Source != sluice.FromLocalView {
				t.Fatalf("during the outage: %+v, want allowed from the view", d)
			}
		}
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if s := a.Stats(); s.Pending != 10 || s.FlushErrors == 0 {
			t.Errorf("stats %+v during the outage, want 10 owed and failed flushes", s)
		}
		time.Sleep(time.Second) // the view is now too old
		if d := mustCheck(t, a, c); d.Allowed || d.Source != sluice.FromFailClosed {
			t.Errorf("with a stale view: %+v, want the guard's fail-closed", d)
		}
		f.set(answer)
		time.Sleep(edge.DefaultMaxBackoff) // the breaker lets a probe through
		synctest.Wait()
		if got := used(t, f.next, c); got != 13 {
			t.Errorf("store's usage after the outage: %v, want 13", got)
		}
		if s := a.Stats(); s.Pending != 0 || s.Dropped != 0 {
			t.Errorf("stats %+v after the outage, want nothing owed or dropped", s)
		}
	})
}

// TestAsyncDropsCostOlderThanAWindow: cost owed for longer than its
// limit's window is dropped and counted, not sent into a later window.
func TestAsyncDropsCostOlderThanAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: 100 * time.Millisecond, MaxViewAge: time.Minute})
		c := check(1, hit("k", "100r/10s", sluice.Log))
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		f.set(refuse)
		for range 7 {
			mustCheck(t, a, c)
		}
		time.Sleep(11 * time.Second)
		synctest.Wait()
		f.set(answer)
		time.Sleep(time.Second)
		synctest.Wait()
		if s := a.Stats(); s.Dropped != 7 || s.Pending != 0 {
			t.Errorf("stats %+v, want 7 dropped", s)
		}
		if got := used(t, f.next, c); got != 0 {
			t.Errorf("store's usage %v, want 0: the first check has left the window, the rest was dropped", got)
		}
	})
}

func TestAsyncCloseGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a, err := edge.NewAsync(f, edge.AsyncOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := check(1, hit("k", "100r/h", sluice.Log))
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		f.set(refuse)
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := a.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close = %v, want the deadline", err)
		}
		if s := a.Stats(); s.Dropped != 2 || s.Pending != 0 {
			t.Errorf("stats %+v, want 2 dropped at Close", s)
		}
	})
}

func TestAsyncReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{})
		c := check(1, hit("k", "3r/h", sluice.Log))
		for range 4 {
			mustCheck(t, a, c)
		}
		if err := a.Reset(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		time.Sleep(time.Second)
		if d := mustCheck(t, a, c); !d.Allowed || d.Source != sluice.FromStore {
			t.Errorf("after Reset: %+v, want allowed by the store", d)
		}
		if got := used(t, f.next, c); got != 1 {
			t.Errorf("store's usage %v after Reset and one check, want 1", got)
		}
	})
}

func TestAsyncMaxKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{MaxKeys: 2})
		for k := range 3 {
			c := check(1, hit(fmt.Sprint("k", k), "4r/h", sluice.Log))
			mustCheck(t, a, c)
			mustCheck(t, a, c)
			mustCheck(t, a, c)
			want := sluice.FromLocalView
			if k == 2 {
				want = sluice.FromStore
			}
			if d := mustCheck(t, a, c); d.Source != want {
				t.Errorf("key %d: source %v, want %v", k, d.Source, want)
			}
		}
		// k2's first two checks go to the store for want of a view (a key
		// gets its slot at its third answer); its third and fourth for want
		// of room in the table: two overflows.
		if s := a.Stats(); s.Keys != 2 || s.Overflow != 2 {
			t.Errorf("stats %+v, want 2 keys, 2 overflows", s)
		}
	})
}

func TestNewAsyncValidates(t *testing.T) {
	f := newFlaky(t, nil)
	for _, opts := range []edge.AsyncOptions{{SyncInterval: -1}, {Processes: -1}, {Flushers: -1}, {MaxKeys: -1}, {MaxBytes: -1}, {MaxViewAge: -1}, {FlushTimeout: -1}} {
		if _, err := edge.NewAsync(f, opts); !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("NewAsync(%+v) = %v, want ErrInvalid", opts, err)
		}
	}
	if _, err := edge.NewAsync(nil, edge.AsyncOptions{}); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("NewAsync(nil) = %v, want ErrInvalid", err)
	}
}

// TestAsyncBatchFallsBackToSingleKeys: keys that owe the same cost are
// sent together in one check; when the store denies that check (one key
// filled by another process meanwhile), each key is sent by itself, so
// the others are recorded and only the full key's excess is unrecorded.
func TestAsyncBatchFallsBackToSingleKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: time.Second})
		full := check(1, hit("full", "10r/h", sluice.Log))
		var others []sluice.Check
		for i := range 5 {
			others = append(others, check(1, hit(fmt.Sprint("k", i), "10r/h", sluice.Log)))
		}
		for _, c := range append(others, full) {
			mustCheck(t, a, c)
			mustCheck(t, a, c)
			mustCheck(t, a, c) // the views, from the store
			mustCheck(t, a, c) // owed: 1 each
		}
		for range 7 { // another process fills "full"
			mustCheck(t, f.next, full)
		}
		calls := f.calls.Load()
		time.Sleep(time.Second)
		synctest.Wait()
		for _, c := range others {
			if got := used(t, f.next, c); got != 4 {
				t.Errorf("%s: store's usage %v, want 4", c.Hits[0].Key, got)
			}
		}
		if got := used(t, f.next, full); got != 10 {
			t.Errorf("full: store's usage %v, want 10", got)
		}
		s := a.Stats()
		if s.Unrecorded != 1 || s.Pending != 0 {
			t.Errorf("stats %+v, want 1 unrecorded", s)
		}
		// One batched check (denied), then one call per key, and the full
		// key's fill attempt.
		if got := f.calls.Load() - calls; got < 7 || got > 9 {
			t.Errorf("%d store calls", got)
		}
	})
}

// TestAsyncOneBudgetPerState: checks that differ only in what does not
// identify a state in the store (the limit's Name, the default algorithm
// spelled out) share one budget, so together they admit no more than the
// limit.
func TestAsyncOneBudgetPerState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: 10 * time.Second})
		l := sluice.Limit{Rate: 10, Window: time.Minute}
		named, spelled := l, l
		named.Name, spelled.Algorithm = "a", sluice.SlidingWindow
		var admitted int
		for i := range 40 {
			lim := []sluice.Limit{l, named, spelled}[i%3]
			d := mustCheck(t, a, sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: lim}}, Cost: 1})
			if d.Allowed {
				admitted++
			}
		}
		if admitted != 10 {
			t.Errorf("admitted %d over three spellings of one 10r/m state, want 10", admitted)
		}
	})
}

// TestAsyncDropsOnlyCostOlderThanAWindow: during an outage, cost admitted
// more than a window ago is dropped, and cost admitted since is sent when
// the store is back, not dropped with it.
func TestAsyncDropsOnlyCostOlderThanAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: 100 * time.Millisecond, MaxViewAge: time.Minute})
		c := check(1, hit("k", "100r/10s", sluice.Log))
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		f.set(refuse)
		for range 3 {
			mustCheck(t, a, c) // old: dropped
		}
		time.Sleep(9 * time.Second)
		for range 5 {
			mustCheck(t, a, c) // young: sent
		}
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		f.set(answer)
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if s := a.Stats(); s.Dropped != 3 || s.Pending != 0 {
			t.Errorf("stats %+v, want the 3 old ones dropped, nothing pending", s)
		}
		if got := used(t, f.next, c); got != 5 {
			t.Errorf("store's usage %v, want the 5 admitted within the window", got)
		}
	})
}

// TestAsyncCloseHonoursItsContext: Close returns when its context ends,
// even while a flush waits on a store that does not answer (here for up to
// the FlushTimeout of an hour), and counts what it could not send.
func TestAsyncCloseHonoursItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a, err := edge.NewAsync(f, edge.AsyncOptions{FlushTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		c := check(1, hit("k", "100r/h", sluice.Log))
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		f.set(hang)
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		time.Sleep(150 * time.Millisecond) // a flush round is under way, hanging
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := a.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close = %v, want the deadline", err)
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Errorf("Close took %v with a context of 100ms", took)
		}
		if s := a.Stats(); s.Dropped != 2 || s.Pending != 0 {
			t.Errorf("stats %+v, want 2 dropped at Close", s)
		}
	})
}

// TestAsyncOneBudgetAcrossARateChange: a reload that changes a limit's
// rate leaves one state in the store, so it keeps one slot and one budget:
// checks of the old and new rate, interleaved, admit no more than the
// store allows the new one.
func TestAsyncOneBudgetAcrossARateChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: 10 * time.Second})
		old, raised := hit("k", "10r/m", sluice.SlidingWindow), hit("k", "12r/m", sluice.SlidingWindow)
		var admitted int
		for i := range 60 {
			if mustCheck(t, a, check(1, []sluice.Hit{old, raised}[i%2])).Allowed {
				admitted++
			}
		}
		if admitted > 12 {
			t.Errorf("admitted %d over checks of 10r/m and 12r/m on one state, want at most 12", admitted)
		}
		// At most one: a state whose checks alternate limits has no view
		// to decide from, and each goes to the store; the answers of a key
		// without a slot are kept in the seen table, which makes none.
		if s := a.Stats(); s.Keys > 1 {
			t.Errorf("%d slots for one state, want at most 1", s.Keys)
		}
	})
}

// TestAsyncFirstSightHasNoEffect: FirstSight is accepted and ignored: a
// key's first checks go to the store.
func TestAsyncFirstSightHasNoEffect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAsync(t, newFlaky(t, nil), edge.AsyncOptions{FirstSight: 5})
		if d := mustCheck(t, a, check(1, hit("new", "10r/h", sluice.Log))); d.Source != sluice.FromStore {
			t.Errorf("a key's first check: %+v, want decided by the store", d)
		}
	})
}

// TestAsyncWaitersWakeWhenCostIsDropped: a check waiting for its key's
// flush (a check of two keys: one key's check asks the store with its
// unsent cost instead) is woken when that flush finds nothing to send, the
// key's cost having been dropped meanwhile (owed for longer than its
// window, behind a round that hung on the store), and decides from the
// views.
func TestAsyncWaitersWakeWhenCostIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		a := newAsync(t, f, edge.AsyncOptions{SyncInterval: 100 * time.Millisecond, FlushTimeout: 5 * time.Second})
		hotHit, warmHit := hit("hot", "11r/s", sluice.Log), hit("warm", "100r/h", sluice.Log)
		hot, warm, slow := check(1, hotHit), check(1, warmHit), check(1, hit("slow", "100r/h", sluice.Log))
		for _, c := range []sluice.Check{hot, hot, hot, warm, warm, warm, slow, slow, slow, slow} {
			mustCheck(t, a, c) // the views; 1 owed on slow
		}
		f.set(hang)
		time.Sleep(150 * time.Millisecond) // a round sends slow's cost and hangs
		for range 8 {
			mustCheck(t, a, hot) // hot's budget, queued behind the hung round
		}
		f.set(answer)
		if d := mustCheck(t, a, check(1, hotHit, warmHit)); !d.Allowed || d.Source != sluice.FromLocalView {
			t.Errorf("the check that waited: %+v, want allowed from the view once hot's cost was dropped", d)
		}
		if s := a.Stats(); s.Dropped != 8 {
			t.Errorf("stats %+v, want hot's 8 dropped", s)
		}
	})
}
