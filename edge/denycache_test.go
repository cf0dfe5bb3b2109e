package edge_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/storetest"
)

func newDenyCache(t testing.TB, next sluice.Limiter, opts edge.DenyCacheOptions) *edge.DenyCache {
	t.Helper()
	dc, err := edge.NewDenyCache(next, opts)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

func TestDenyCacheRepeatsDenial(t *testing.T) {
	clk := newClock()
	f := newFlaky(t, clk.Now)
	dc := newDenyCache(t, f, edge.DenyCacheOptions{Now: clk.Now})
	c := check(1, tenPerMinute)
	for range 10 {
		mustCheck(t, dc, c)
	}
	first := mustCheck(t, dc, c)
	if first.Allowed || first.Source != sluice.FromStore || first.RetryAfter() != time.Minute {
		t.Fatalf("11th check: %+v, want denied by the store for 1m", first)
	}
	calls := f.calls.Load()
	clk.Advance(20 * time.Second)
	d := mustCheck(t, dc, c)
	if d.Allowed || d.Source != sluice.FromDenyCache || storetest.DenierOf(d) != 0 {
		t.Fatalf("12th check: %+v, want denied from the cache by hit 0", d)
	}
	if got, want := d.RetryAfter(), 40*time.Second; got != want {
		t.Errorf("RetryAfter from the cache = %v, want %v", got, want)
	}
	if got, want := d.Hits[0].Used, first.Hits[0].Used; got != want {
		t.Errorf("Used from the cache = %v, want the stored %v", got, want)
	}
	if f.calls.Load() != calls {
		t.Errorf("the cache called the store")
	}
	if s := dc.Stats(); s.Hits != 1 || s.Stored != 1 || s.Entries != 1 {
		t.Errorf("stats %+v, want 1 hit, 1 stored, 1 entry", s)
	}
	clk.Advance(40 * time.Second)
	if d := mustCheck(t, dc, c); !d.Allowed || d.Source != sluice.FromStore {
		t.Errorf("after RetryAfter: %+v, want allowed by the store", d)
	}
}

func TestDenyCacheOnlyTheSameCheck(t *testing.T) {
	clk := newClock()
	f := newFlaky(t, clk.Now)
	dc := newDenyCache(t, f, edge.DenyCacheOptions{Now: clk.Now})
	full := hit("k", "2r/m", sluice.GCRA)
	mustCheck(t, dc, check(2, full))
	mustCheck(t, dc, check(1, full)) // denied by the store, stored
	others := []sluice.Check{
		check(0, full), // a peek
		{Hits: []sluice.Hit{full}, Cost: 1, Shadow: true},
		{Hits: []sluice.Hit{full}, Cost: 1, Group: "g"},
		check(2, full),
		check(1, full, hit("other", "5r/m", sluice.Log)),
	}
	for _, c := range others {
		calls := f.calls.Load()
		if d := mustCheck(t, dc, c); d.Source == sluice.FromDenyCache || f.calls.Load() != calls+1 {
			t.Errorf("check %+v answered from the cache (source %v), want the store", c, d.Source)
		}
	}
}

func TestDenyCacheMaxAge(t *testing.T) {
	clk := newClock()
	f := newFlaky(t, clk.Now)
	dc := newDenyCache(t, f, edge.DenyCacheOptions{Now: clk.Now, MaxAge: 5 * time.Second})
	c := check(1, hit("k", "1r/h", sluice.Log))
	mustCheck(t, dc, c)
	mustCheck(t, dc, c) // denied for an hour, stored for 5 s
	clk.Advance(4 * time.Second)
	if d := mustCheck(t, dc, c); d.Source != sluice.FromDenyCache {
		t.Errorf("source %v within MaxAge, want deny-cache", d.Source)
	}
	clk.Advance(time.Second)
	if d := mustCheck(t, dc, c); d.Source != sluice.FromStore || d.Allowed {
		t.Errorf("past MaxAge: allowed %v from %v, want denied by the store", d.Allowed, d.Source)
	}
}

func TestDenyCacheIsBounded(t *testing.T) {
	clk := newClock()
	f := newFlaky(t, clk.Now)
	const max = 4096
	dc := newDenyCache(t, f, edge.DenyCacheOptions{Now: clk.Now, MaxBytes: max})
	const keys = 1000
	for i := range keys {
		c := check(1, hit(fmt.Sprint("key", i), "1r/h", sluice.Log))
		mustCheck(t, dc, c)
		mustCheck(t, dc, c) // denied, stored
		if b := dc.Stats().Bytes; b > max {
			t.Fatalf("%d bytes after %d denials, want at most %d", b, i+1, max)
		}
	}
	s := dc.Stats()
	if s.Stored != keys || s.Evicted != keys-uint64(s.Entries) || s.Entries < 10 {
		t.Errorf("stats %+v after %d denials into %d bytes", s, keys, max)
	}
	// The most recent denial is still there.
	if d := mustCheck(t, dc, check(1, hit(fmt.Sprint("key", keys-1), "1r/h", sluice.Log))); d.Source != sluice.FromDenyCache {
		t.Errorf("latest denial: source %v, want deny-cache", d.Source)
	}
}

// TestDenyCacheSecondChance: a denial that keeps being hit survives a
// stream of one-off denials that overflow the cache.
func TestDenyCacheSecondChance(t *testing.T) {
	clk := newClock()
	f := newFlaky(t, clk.Now)
	dc := newDenyCache(t, f, edge.DenyCacheOptions{Now: clk.Now, MaxBytes: 4096})
	hot := check(1, hit("hot", "1r/h", sluice.Log))
	mustCheck(t, dc, hot)
	mustCheck(t, dc, hot)
	for i := range 2000 {
		c := check(1, hit(fmt.Sprint("cold", i), "1r/h", sluice.Log))
		mustCheck(t, dc, c)
		mustCheck(t, dc, c)
		if d := mustCheck(t, dc, hot); d.Source != sluice.FromDenyCache {
			t.Fatalf("after %d cold denials the hot one was evicted (source %v)", i+1, d.Source)
		}
	}
	if s := dc.Stats(); s.Evicted == 0 {
		t.Errorf("stats %+v: the cold denials evicted nothing, the test did not fill the cache", s)
	}
}

func TestDenyCacheResetForgets(t *testing.T) {
	clk := newClock()
	f := newFlaky(t, clk.Now)
	dc := newDenyCache(t, f, edge.DenyCacheOptions{Now: clk.Now})
	k := hit("k", "1r/h", sluice.Log)
	other := hit("other", "1r/h", sluice.Log)
	both := check(1, k, hit("k", "1r/m", sluice.GCRA))
	for _, c := range []sluice.Check{check(1, k), check(1, k), both, check(1, other), check(1, other)} {
		mustCheck(t, dc, c)
	}
	if s := dc.Stats(); s.Entries != 3 {
		t.Fatalf("%d entries, want 3", s.Entries)
	}
	if err := dc.Reset(context.Background(), check(0, k)); err != nil {
		t.Fatal(err)
	}
	if s := dc.Stats(); s.Entries != 1 {
		t.Errorf("%d entries after resetting k, want 1 (other's)", s.Entries)
	}
	if d := mustCheck(t, dc, check(1, k)); !d.Allowed || d.Source != sluice.FromStore {
		t.Errorf("after Reset: allowed %v from %v, want allowed by the store", d.Allowed, d.Source)
	}
	if d := mustCheck(t, dc, check(1, other)); d.Source != sluice.FromDenyCache {
		t.Errorf("other key after Reset: source %v, want deny-cache", d.Source)
	}
}

// gated is a Limiter that holds each Check's answer until told to let it go.
type gated struct {
	sluice.Limiter
	entered chan struct{}
	release chan struct{}
}

func (g *gated) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	err := g.Limiter.Check(ctx, c, d)
	g.entered <- struct{}{}
	<-g.release
	return err
}

func TestDenyCacheResetDuringCheck(t *testing.T) {
	clk := newClock()
	m := newMemstore(t, clk.Now)
	c := check(1, hit("k", "1r/h", sluice.Log))
	mustCheck(t, m, c) // the next check is denied
	g := &gated{Limiter: m, entered: make(chan struct{}), release: make(chan struct{})}
	dc := newDenyCache(t, g, edge.DenyCacheOptions{Now: clk.Now})
	var wg sync.WaitGroup
	wg.Go(func() {
		if d := mustCheck(t, dc, c); d.Allowed {
			t.Error("the check decided before the reset was allowed")
		}
	})
	<-g.entered // the store has denied; the answer is on its way
	if err := dc.Reset(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	wg.Wait()
	go func() { <-g.entered }()
	if d := mustCheck(t, dc, c); !d.Allowed || d.Source != sluice.FromStore {
		t.Errorf("after Reset: allowed %v from %v: a denial decided before the reset was stored", d.Allowed, d.Source)
	}
}

func TestDenyCacheIgnoresDegradedDenials(t *testing.T) {
	clk := newClock()
	f := newFlaky(t, clk.Now)
	f.set(refuse)
	g := newGuard(t, f, edge.GuardOptions{Policy: edge.PolicyClosed})
	dc := newDenyCache(t, g, edge.DenyCacheOptions{Now: clk.Now})
	mustCheck(t, dc, check(1, tenPerMinute))
	if s := dc.Stats(); s.Stored != 0 {
		t.Errorf("a fail-closed denial was stored: %+v", s)
	}
}

func TestNewDenyCacheValidates(t *testing.T) {
	f := newFlaky(t, nil)
	for _, opts := range []edge.DenyCacheOptions{{MaxBytes: -1}, {MaxBytes: 100}, {MaxAge: -time.Second}} {
		if _, err := edge.NewDenyCache(f, opts); !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("NewDenyCache(%+v) = %v, want ErrInvalid", opts, err)
		}
	}
	if _, err := edge.NewDenyCache(nil, edge.DenyCacheOptions{}); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("NewDenyCache(nil) = %v, want ErrInvalid", err)
	}
}

// TestDenyCacheNeverDeniesWhatTheStoreAllows is the cache's correctness
// property. Two identical stores see the same traffic: one behind the
// cache, the other (the oracle) directly. Other processes' traffic reaches
// both stores around the cache, and resets go through it. Every decision of
// the cache must equal the oracle's: a denial from the cache is a denial the
// store would have made.
func TestDenyCacheNeverDeniesWhatTheStoreAllows(t *testing.T) {
	const seed = 1
	for _, algo := range sluice.Algorithms() {
		t.Run(string(algo), func(t *testing.T) {
			clk := newClock()
			behind, oracle := newMemstore(t, clk.Now), newMemstore(t, clk.Now)
			dc := newDenyCache(t, behind, edge.DenyCacheOptions{Now: clk.Now, MaxBytes: 4096})
			checks := propertyChecks(algo)
			r := rand.New(rand.NewPCG(seed, uint64(len(algo))))
			var last sluice.Check
			var lastWait time.Duration // RetryAfter of the last denial
			for step := range 20_000 {
				c := checks[r.IntN(len(checks))]
				if lastWait > 0 && r.IntN(3) == 0 {
					// Retry the last denial right at its boundary, where a
					// cache that holds denials too long would be caught.
					// Near the end of what the cache holds, too (see hold).
					c = last
					const us = time.Microsecond
					pc := (lastWait / 100).Truncate(us)
					offsets := []time.Duration{-us, 0, us, -pc - us, -pc - 2*us}
					clk.Advance(lastWait + offsets[r.IntN(len(offsets))])
				} else {
					clk.Advance(randomStep(r))
				}
				lastWait = 0
				switch r.IntN(20) {
				case 0: // a reset, through the cache
					if err := dc.Reset(context.Background(), c); err != nil {
						t.Fatal(err)
					}
					if err := oracle.Reset(context.Background(), c); err != nil {
						t.Fatal(err)
					}
				case 1, 2, 3: // another process's check
					if a, b := mustCheck(t, behind, c), mustCheck(t, oracle, c); a.Allowed != b.Allowed {
						t.Fatalf("step %d: the two stores disagree", step)
					}
				default:
					got, want := mustCheck(t, dc, c), mustCheck(t, oracle, c)
					if got.Allowed != want.Allowed {
						t.Fatalf("step %d: %+v: cache says allowed %v (source %v), store says %v",
							step, c, got.Allowed, got.Source, want.Allowed)
					}
					if !want.Allowed {
						last, lastWait = c, want.RetryAfter()
					}
					if got.Source == sluice.FromDenyCache && got.RetryAfter() > want.RetryAfter() {
						t.Fatalf("step %d: RetryAfter from the cache %v, more than the store's %v",
							step, got.RetryAfter(), want.RetryAfter())
					}
				}
			}
			if s := dc.Stats(); s.Hits < 500 {
				t.Errorf("only %d denials from the cache: the property was barely exercised (%+v)", s.Hits, s)
			}
		})
	}
}

// randomStep returns a wait in whole microseconds: mostly under 200ms (so
// denials repeat), sometimes up to 15s (so windows roll).
func randomStep(r *rand.Rand) time.Duration {
	limit := 200 * time.Millisecond
	if r.IntN(10) == 0 {
		limit = 15 * time.Second
	}
	return time.Duration(r.Int64N(int64(limit/time.Microsecond))) * time.Microsecond
}

// propertyChecks returns overlapping checks on two keys, costs 1 to 3.
func propertyChecks(algo sluice.Algorithm) []sluice.Check {
	a := hit("a", "5r/10s", algo)
	b := hit("b", "8r/10s", algo)
	slow := hit("a", "20r/m", algo)
	return []sluice.Check{
		check(1, a), check(2, a), check(3, a),
		check(1, b), check(3, b),
		check(1, a, slow), check(2, a, b), check(1, b, slow),
	}
}

func BenchmarkDenyCacheHit(b *testing.B) {
	m := newMemstore(b, nil)
	dc := newDenyCache(b, m, edge.DenyCacheOptions{})
	c := check(1, hit("k", "1r/h", sluice.Log))
	mustCheck(b, dc, c)
	mustCheck(b, dc, c)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var d sluice.Decision
		for pb.Next() {
			if err := dc.Check(context.Background(), c, &d); err != nil || d.Source != sluice.FromDenyCache {
				b.Fatal(err, d.Source)
			}
		}
	})
}

func TestDenyCacheHitDoesNotAllocate(t *testing.T) {
	m := newMemstore(t, nil)
	dc := newDenyCache(t, m, edge.DenyCacheOptions{})
	c := check(1, hit("k", "1r/h", sluice.Log), hit("k", "1r/m", sluice.GCRA))
	mustCheck(t, dc, c)
	d := mustCheck(t, dc, c)
	allocs := testing.AllocsPerRun(100, func() {
		if err := dc.Check(context.Background(), c, &d); err != nil || d.Source != sluice.FromDenyCache {
			t.Fatal(err, d.Source)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per cached denial, want 0", allocs)
	}
}

// TestDenyCacheMemoryPerEntry measures the heap an entry takes for a
// one-hit check (the figure in DenyCacheOptions.MaxBytes' doc and in
// docs/failure.md) and fails if it is more than the cache counts.
func TestDenyCacheMemoryPerEntry(t *testing.T) {
	clk := newClock()
	dc := newDenyCache(t, newMemstore(t, clk.Now), edge.DenyCacheOptions{Now: clk.Now})
	checks := make([]sluice.Check, 10_000)
	for i := range checks {
		checks[i] = check(1, hit(fmt.Sprintf("user-%08d", i), "1r/h", sluice.SlidingWindow))
		mustCheck(t, dc, checks[i]) // allowed: the store's state, not the cache's
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, c := range checks {
		mustCheck(t, dc, c) // denied: stored
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	s := dc.Stats()
	perEntry := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(s.Entries)
	t.Logf("%d entries held after %d denials, %.0f bytes each on the heap; the cache counts %d bytes in all (%+v)", s.Entries, len(checks), perEntry, s.Bytes, s)
	if perEntry > 140 {
		t.Errorf("%.0f bytes per entry, want at most 140", perEntry)
	}
	runtime.KeepAlive(checks)
}

// denyAll is a Limiter that denies every check for an hour as a store
// would, keeping nothing: the heap measured behind it is the cache's.
type denyAll struct{}

func (denyAll) Check(_ context.Context, c sluice.Check, d *sluice.Decision) error {
	d.Prepare(len(c.Hits))
	for i := range d.Hits {
		d.Hits[i] = sluice.HitResult{Remaining: 0, Used: float64(c.Hits[i].Limit.Rate), RetryAfter: time.Hour, ResetAfter: time.Hour}
	}
	d.Conclude(sluice.FromStore)
	return nil
}

func (denyAll) Reset(context.Context, sluice.Check) error { return nil }

// TestDenyCacheMemoryAttack: thousands of denied checks with keys of 60
// KB each. The cache keeps fingerprints, not keys, so its heap stays under
// its bound (a cache keeping the checks would hold ~122 KB per entry).
func TestDenyCacheMemoryAttack(t *testing.T) {
	const maxBytes = 1 << 20
	dc := newDenyCache(t, denyAll{}, edge.DenyCacheOptions{MaxBytes: maxBytes})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	key := make([]byte, 60_000)
	const n = 4000
	for i := range n {
		copy(key, fmt.Sprintf("attacker-%d-", i))
		c := check(1, hit(string(key), "10r/m", sluice.SlidingWindow), hit(string(key[:len(key)/2]), "100r/h", sluice.GCRA))
		if d := mustCheck(t, dc, c); d.Allowed {
			t.Fatal("allowed")
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	s := dc.Stats()
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d denials of 60 KB keys: %d entries, the cache counts %d bytes (bound %d); the heap grew by %d bytes", n, s.Entries, s.Bytes, maxBytes, grown)
	if s.Stored != n || s.Bytes > maxBytes {
		t.Errorf("stats %+v, want %d stored in at most %d bytes", s, n, maxBytes)
	}
	if grown > maxBytes {
		t.Errorf("the heap grew by %d bytes, more than the cache's bound %d", grown, maxBytes)
	}
}

// slow is a limiter that answers after a delay, counting the calls in
// flight at once; for tests in a synctest bubble.
type slow struct {
	next            sluice.Limiter
	delay           time.Duration
	mu              sync.Mutex
	calls, in, most int
}

func (s *slow) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	s.mu.Lock()
	s.calls++
	s.in++
	s.most = max(s.most, s.in)
	s.mu.Unlock()
	time.Sleep(s.delay)
	s.mu.Lock()
	s.in--
	s.mu.Unlock()
	return s.next.Check(ctx, c, d)
}

func (s *slow) Reset(ctx context.Context, c sluice.Check) error { return s.next.Reset(ctx, c) }

// TestDenyCacheOneAskerPerExpiredDenial: when a hot check's denial
// expires, its callers do not all go to the store at once: one asks, the
// others wait for its answer; a new denial (here, another process took the
// refill) is then repeated to them all.
func TestDenyCacheOneAskerPerExpiredDenial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemstore(t, nil)
		s := &slow{next: m, delay: time.Millisecond}
		dc := newDenyCache(t, s, edge.DenyCacheOptions{})
		c := check(1, hit("hot", "1r/s", sluice.Log))
		mustCheck(t, dc, c)
		mustCheck(t, dc, c) // denied, stored
		time.Sleep(time.Second)
		mustCheck(t, m, c) // another process takes the refill
		s.mu.Lock()
		s.calls, s.most = 0, 0
		s.mu.Unlock()
		var wg sync.WaitGroup
		var allowed atomicInt
		for range 50 {
			wg.Go(func() {
				if mustCheck(t, dc, c).Allowed {
					allowed.Add(1)
				}
			})
		}
		wg.Wait()
		if s.calls != 1 || s.most != 1 || allowed.Load() != 0 {
			t.Errorf("%d store calls (%d at once), %d allowed, after the denial expired; want 1 call, all denied", s.calls, s.most, allowed.Load())
		}
	})
}

// TestDenyCacheZeroValue: the zero DenyCache (and Async) has no limiter; it says so
// with an error rather than panicking.
func TestDenyCacheZeroValue(t *testing.T) {
	var dc edge.DenyCache
	var d sluice.Decision
	if err := dc.Check(context.Background(), check(1, tenPerMinute), &d); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("Check on the zero value = %v, want ErrInvalid", err)
	}
	if err := dc.Reset(context.Background(), check(1, tenPerMinute)); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("Reset on the zero value = %v, want ErrInvalid", err)
	}
	var a edge.Async
	if err := a.Check(context.Background(), check(1, tenPerMinute), &d); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("Check on the zero Async = %v, want ErrInvalid", err)
	}
}

// held is a limiter whose checks of one key wait, once started, until
// released: a store call under way for as long as the test wants.
type held struct {
	next     sluice.Limiter
	key      string
	started  chan struct{}
	released chan struct{}
}

func (h *held) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if c.Hits[0].Key == h.key {
		close(h.started)
		<-h.released
	}
	return h.next.Check(ctx, c, d)
}

func (h *held) Reset(ctx context.Context, c sluice.Check) error { return h.next.Reset(ctx, c) }

// TestDenyCacheHitsYieldDuringStoreCall: while a store call of the cache
// is under way, a caller looping on cache hits gives up its processor now
// and then, so a goroutine waiting to run (in a real store, the one that
// carries the call's reply) runs after a few hits, not after the runtime
// preempts the looping caller (every 10 ms, thousands of hits: long
// enough for the store call to miss its deadline). On one processor, the goroutine started before the
// loop can run only when the loop yields. Not in a synctest bubble: what
// is tested is the runtime's own scheduling.
func TestDenyCacheHitsYieldDuringStoreCall(t *testing.T) {
	h := &held{next: newMemstore(t, nil), key: "asked", started: make(chan struct{}), released: make(chan struct{})}
	dc := newDenyCache(t, h, edge.DenyCacheOptions{})
	denied := check(1, hit("denied", "1r/h", sluice.Log))
	mustCheck(t, dc, denied)
	if mustCheck(t, dc, denied).Allowed {
		t.Fatal("the second check of 1r/h was allowed")
	}
	asked := make(chan error, 1)
	go func() {
		var d sluice.Decision
		asked <- dc.Check(context.Background(), check(1, hit("asked", "1r/h", sluice.Log)), &d)
	}()
	<-h.started // a store call of the cache is under way

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var ran atomicInt
	go func() { ran.Store(1) }()
	hits := 0
	var d sluice.Decision
	for ran.Load() == 0 {
		if err := dc.Check(context.Background(), denied, &d); err != nil || d.Allowed || d.Source != sluice.FromDenyCache {
			t.Fatalf("hit %d: %v, allowed %v, source %v; want a denial from the cache", hits, err, d.Allowed, d.Source)
		}
		hits++
	}
	close(h.released)
	if err := <-asked; err != nil {
		t.Fatal(err)
	}
	// One hit in 8 yields: 1,000 hits without one has a chance of 1e-58.
	if hits > 1000 {
		t.Errorf("the waiting goroutine ran after %d hits; want a few", hits)
	}
	t.Logf("the waiting goroutine ran after %d hits", hits)
}
