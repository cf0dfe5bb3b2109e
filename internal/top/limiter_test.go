package top

import (
	"context"
	"flag"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

func newSet(t testing.TB, zones map[string]bool) *Set {
	t.Helper()
	return newSetOpts(t, Options{Sample: 1}, zones)
}

func newSetOpts(t testing.TB, opts Options, zones map[string]bool) *Set {
	t.Helper()
	s, err := NewSet(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Configure(zones); err != nil {
		t.Fatal(err)
	}
	return s
}

func newMemstore(t testing.TB) *memstore.Store {
	t.Helper()
	m, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLimiterObserves checks the limiter against a real memory store: a
// key over its limit is listed as denied, a shadow zone's as a shadow
// denial, a key at 80% as near, a reset clears the key, and a zone over
// several keys blames only the key that denied.
func TestLimiterObserves(t *testing.T) {
	set := newSet(t, map[string]bool{"api": true, "trial": true})
	l := &Limiter{Next: newMemstore(t), Set: set}
	ctx := context.Background()
	limit := sluice.Limit{Rate: 5, Window: time.Minute}
	check := func(zone, key string, shadow bool) *sluice.Decision {
		t.Helper()
		lim := limit
		lim.Shadow = shadow
		var d sluice.Decision
		if err := l.Check(ctx, sluice.Check{Hits: []sluice.Hit{{Zone: zone, Key: key, Limit: lim}}, Cost: 1}, &d); err != nil {
			t.Fatal(err)
		}
		return &d
	}
	for range 7 {
		check("api", "alice", false)
		check("trial", "bob", true)
	}
	for range 4 {
		check("api", "carol", false)
	}
	api := set.Tracker("api").Snapshot(10)
	if len(api.Denied) != 1 || api.Denied[0].Key != "alice" || api.Denied[0].Count != 2 || api.Denied[0].Shadow {
		t.Errorf("api denied = %+v, want alice denied twice", api.Denied)
	}
	if len(api.Near) != 2 {
		t.Errorf("api near = %+v, want alice (4/5, 5/5) and carol (4/5)", api.Near)
	}
	trial := set.Tracker("trial").Snapshot(10)
	if len(trial.Denied) != 1 || trial.Denied[0].Key != "bob" || !trial.Denied[0].Shadow || trial.Admitted[0].Count != 7 {
		t.Errorf("trial = denied %+v admitted %+v, want bob shadow-denied and 7 admitted", trial.Denied, trial.Admitted)
	}
	if err := l.Reset(ctx, sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: "alice", Limit: limit}}}); err != nil {
		t.Fatal(err)
	}
	api = set.Tracker("api").Snapshot(10)
	for _, k := range append(api.Denied, api.Near...) {
		if k.Key == "alice" {
			t.Errorf("alice still listed after reset: %+v", k)
		}
	}
	// Two keys in one check: only dave's limit denies; erin is refused.
	for range 5 {
		check("api", "dave", false)
	}
	var d sluice.Decision
	c := sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: "dave", Limit: limit}, {Zone: "api", Key: "erin", Limit: limit}}, Cost: 1}
	if err := l.Check(ctx, c, &d); err != nil || d.Allowed {
		t.Fatalf("check = %v, %v; want denied", d.Allowed, err)
	}
	for _, k := range set.Tracker("api").Snapshot(10).Denied {
		if k.Key == "erin" {
			t.Errorf("erin listed as denied though dave's limit denied")
		}
	}
}

// TestLimiterAddsDomains checks that zones under AddPrefix get a tracker
// on their first check, with keys hidden, and others none.
func TestLimiterAddsDomains(t *testing.T) {
	set := newSet(t, nil)
	l := &Limiter{Next: newMemstore(t), Set: set, AddPrefix: "rls/"}
	var d sluice.Decision
	for _, zone := range []string{"rls/edge", "other"} {
		if err := l.Check(context.Background(), sluice.Check{Hits: []sluice.Hit{{Zone: zone, Key: "k", Limit: sluice.Limit{Rate: 1, Window: time.Second}}}, Cost: 1}, &d); err != nil {
			t.Fatal(err)
		}
	}
	if got := set.Names(); len(got) != 1 || got[0] != "rls/edge" || set.Tracker("rls/edge").ShowKeys() {
		t.Errorf("trackers = %v, want rls/edge alone, keys hidden", got)
	}
	if err := set.Configure(map[string]bool{"z": false}, "rls/"); err != nil {
		t.Fatal(err)
	}
	if got := set.Names(); len(got) != 2 {
		t.Errorf("after Configure keeping rls/: %v", got)
	}
}

// TestLimiterNoAllocs checks that tracking adds no allocation to a check
// of the library path (a memory store), for new keys and known ones.
func TestLimiterNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	set := newSet(t, map[string]bool{"api": false})
	m := newMemstore(t)
	l := &Limiter{Next: m, Set: set}
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	limit := sluice.Limit{Rate: 3, Window: time.Minute}
	ctx := context.Background()
	for _, lim := range []sluice.Limiter{m, l} { // warm the store's keys
		var d sluice.Decision
		for _, k := range keys {
			lim.Check(ctx, sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: k, Limit: limit}}, Cost: 1}, &d)
		}
	}
	measure := func(lim sluice.Limiter) float64 {
		var d sluice.Decision
		d.Prepare(1)
		i := 0
		return testing.AllocsPerRun(5000, func() {
			i++
			c := sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: keys[i%len(keys)], Limit: limit}}, Cost: 1}
			lim.Check(ctx, c, &d)
		})
	}
	off, on := measure(m), measure(l)
	if on > off {
		t.Errorf("allocations per check: %v tracked, %v untracked", on, off)
	}
}

// BenchmarkLimiter compares a check of a memory store (the library path)
// with and without tracking (default options, the set's clock running),
// side by side, from GOMAXPROCS goroutines over 10,000 keys: drawn
// uniformly (every key new to the lists, the worst case) or from a Zipf
// law (s=1.1, a few heavy keys, as real traffic). One key in ten (or in
// a hundred) has a limit of 1 per minute, so is denied after its first
// check.
//
//	go test -run '^$' -bench 'BenchmarkLimiter$' -count 6 ./internal/top
func BenchmarkLimiter(b *testing.B) {
	keys, traces := benchTraces(5, 6)
	for _, tc := range benchCases {
		for _, tracked := range []bool{false, true} {
			name := tc.name() + "/off"
			if tracked {
				name = tc.name() + "/on"
			}
			b.Run(name, func(b *testing.B) { benchLimiter(b, keys, traces[tc.trace], tc.denyEvery, tracked) })
		}
	}
}

// benchBudget is Options.Budget of BenchmarkLimiter's trackers. Under
// callgrind, which runs a check a few hundred times slower, the default
// budget is never reached: -budget 16 makes the flood regime of a native
// run (one observation in 2^7 or 2^8 on these traces).
var benchBudget = flag.Int("budget", 0, "Options.Budget of BenchmarkLimiter's trackers (0: the default)")

func benchLimiter(b *testing.B, keys []string, trace []int, denyEvery int, tracked bool) {
	m := newMemstore(b)
	var lim sluice.Limiter = m
	if tracked {
		set := newSetOpts(b, Options{Budget: *benchBudget}, map[string]bool{"api": false})
		runClock(b, set)
		lim = &Limiter{Next: m, Set: set}
	}
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer() // not the store's and the set's making
	b.RunParallel(func(pb *testing.PB) {
		var d sluice.Decision
		ctx := context.Background()
		hits := make([]sluice.Hit, 1)
		i := int(worker.Add(1)) * 7919
		for ; pb.Next(); i++ {
			k := trace[i%len(trace)]
			rate := int64(1_000_000_000)
			if k%denyEvery == denyEvery-1 {
				rate = 1 // denied
			}
			hits[0] = sluice.Hit{Zone: "api", Key: keys[k], Limit: sluice.Limit{Rate: rate, Window: time.Minute}}
			if err := lim.Check(ctx, sluice.Check{Hits: hits, Cost: 1}, &d); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// checkTrace runs n checks of the keys trace names, from offset i; one
// key in denyEvery (k%denyEvery == denyEvery-1) has a limit of 1 per
// minute, so is denied after its first check.
func checkTrace(lim sluice.Limiter, keys []string, trace []int, denyEvery, i, n int) {
	var d sluice.Decision
	ctx := context.Background()
	hits := make([]sluice.Hit, 1)
	for end := i + n; i < end; i++ {
		k := trace[i%len(trace)]
		rate := int64(1_000_000_000)
		if k%denyEvery == denyEvery-1 {
			rate = 1
		}
		hits[0] = sluice.Hit{Zone: "api", Key: keys[k], Limit: sluice.Limit{Rate: rate, Window: time.Minute}}
		lim.Check(ctx, sluice.Check{Hits: hits, Cost: 1}, &d)
	}
}

// runClock runs the set's clock until the benchmark ends, and returns once
// it has been read: with one thread and no preemption (as under
// callgrind), the checks would otherwise all read Now.
func runClock(b *testing.B, set *Set) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go set.Run(ctx)
	for set.clock.Load() == 0 {
		runtime.Gosched()
	}
}

// benchCase is a trace of the benchmarks and how many of its keys are
// denied: one in denyEvery.
type benchCase struct {
	trace     string
	denyEvery int
}

var benchCases = []benchCase{{"zipf", 100}, {"zipf", 10}, {"uniform", 10}}

func (c benchCase) name() string { return c.trace + "/deny-1-in-" + strconv.Itoa(c.denyEvery) }

// benchTraces returns 10,000 keys and two traces of 65,536 checks of
// them, by index: "uniform" and "zipf" (s=1.1), drawn from a PCG seeded
// with seed1, seed2.
func benchTraces(seed1, seed2 uint64) ([]string, map[string][]int) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	rng := rand.New(rand.NewPCG(seed1, seed2))
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(len(keys)-1))
	traces := map[string][]int{"uniform": make([]int, 1<<16), "zipf": make([]int, 1<<16)}
	for i := range traces["uniform"] {
		traces["uniform"][i] = rng.IntN(len(keys))
		traces["zipf"][i] = int(zipf.Uint64())
	}
	return keys, traces
}

// TestSetTrackerLookup checks that a set finds each of its trackers, and
// none for another name, with fewer trackers than it compares by name
// and with more (then the rest are found by the map).
func TestSetTrackerLookup(t *testing.T) {
	for _, n := range []int{0, 1, fewTrackers, fewTrackers + 3} {
		zones := map[string]bool{}
		for i := range n {
			zones["zone-"+strconv.Itoa(i)] = false
		}
		set := newSet(t, zones)
		seen := map[*Tracker]bool{}
		for name := range zones {
			tr := set.Tracker(name)
			if tr == nil || seen[tr] {
				t.Fatalf("%d zones: Tracker(%q) = %p, nil or another zone's", n, name, tr)
			}
			seen[tr] = true
		}
		if tr := set.Tracker("zone-" + strconv.Itoa(n)); tr != nil {
			t.Errorf("%d zones: a tracker for a zone not configured", n)
		}
	}
}
