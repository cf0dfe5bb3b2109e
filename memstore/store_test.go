package memstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/ident"
)

func newStore(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewValidates(t *testing.T) {
	for _, opts := range []Options{
		{MaxKeys: -1},
		{Shards: -1},
		{MaxKeys: 10, Shards: 16},
		{MaxKeys: 10, Shards: 11}, // rounds up to 16
	} {
		if _, err := New(opts); !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", opts, err)
		}
	}
	for _, c := range []struct {
		opts       Options
		wantShards int
	}{
		{Options{}, DefaultShards},
		{Options{MaxKeys: 1000}, 2},
		{Options{MaxKeys: 100}, 1},
		{Options{Shards: 100}, 128},
		{Options{MaxKeys: 8, Shards: 8}, 8},
	} {
		s, err := New(c.opts)
		if err != nil {
			t.Fatalf("New(%+v): %v", c.opts, err)
		}
		if got := len(s.shards); got != c.wantShards {
			t.Errorf("New(%+v): %d shards, want %d", c.opts, got, c.wantShards)
		}
	}
}

func TestCheckErrors(t *testing.T) {
	s := newStore(t, Options{})
	lim := sluice.Limit{Rate: 10, Window: time.Minute}
	var d sluice.Decision
	for name, c := range map[string]sluice.Check{
		"no hits":       {Cost: 1},
		"empty key":     {Hits: []sluice.Hit{{Limit: lim}}, Cost: 1},
		"negative cost": {Hits: []sluice.Hit{{Key: "k", Limit: lim}}, Cost: -1},
		"cost > rate":   {Hits: []sluice.Hit{{Key: "k", Limit: lim}}, Cost: 11},
		"log rate":      {Hits: []sluice.Hit{{Key: "k", Limit: sluice.Limit{Rate: sluice.MaxLogRate + 1, Window: time.Second, Algorithm: sluice.Log}}}, Cost: 1},
	} {
		if err := s.Check(context.Background(), c, &d); !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("%s: Check = %v, want ErrInvalid", name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: lim}}, Cost: 1}
	if err := s.Check(ctx, c, &d); !errors.Is(err, context.Canceled) {
		t.Errorf("Check with a canceled context = %v, want context.Canceled", err)
	}
	if err := s.Reset(ctx, c); !errors.Is(err, context.Canceled) {
		t.Errorf("Reset with a canceled context = %v, want context.Canceled", err)
	}
	if got := s.Stats().Keys; got != 0 {
		t.Errorf("after failed checks, %d keys stored, want 0", got)
	}
}

// TestSteadyStateAllocs holds the store to its promise: checking a known
// key allocates nothing.
func TestSteadyStateAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under coverage and -race")
	}
	for _, a := range sluice.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			s := newStore(t, Options{Now: func() time.Time { return now }})
			lim := sluice.Limit{Rate: 1000, Window: time.Minute, Algorithm: a}
			var d sluice.Decision
			ctx := context.Background()
			check := func() {
				now = now.Add(time.Millisecond)
				// A literal per call, as callers write it: the store must
				// not make the caller's Hits escape.
				c := sluice.Check{Hits: []sluice.Hit{
					{Zone: "z", Key: "client-1", Limit: lim},
					{Zone: "z", Key: "client-1", Limit: sluice.Limit{Rate: 1000, Window: time.Hour, Algorithm: a}},
				}, Cost: 1}
				if err := s.Check(ctx, c, &d); err != nil || !d.Allowed {
					t.Fatalf("Check: %v, %+v", err, d)
				}
			}
			for range 100 { // reach the log's steady size
				check()
			}
			if got := testing.AllocsPerRun(200, check); got != 0 {
				t.Errorf("%v allocations per check, want 0", got)
			}
		})
	}
}

// TestBoundedUnderFlood floods the store with random keys far beyond
// MaxKeys: the number of states never exceeds the bound, the overflow is
// counted as evictions, and a peek or a denial never stores a state.
func TestBoundedUnderFlood(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	const maxKeys = 2048
	s := newStore(t, Options{MaxKeys: maxKeys, Shards: 8, Now: func() time.Time { return now }})
	lim := sluice.Limit{Rate: 5, Window: time.Hour}
	rng := rand.New(rand.NewPCG(1, 2))
	var d sluice.Decision
	check := func(key string, cost int64) {
		t.Helper()
		c := sluice.Check{Hits: []sluice.Hit{{Key: key, Limit: lim}}, Cost: cost}
		if err := s.Check(context.Background(), c, &d); err != nil {
			t.Fatal(err)
		}
	}
	const flood = 50_000
	for i := range flood {
		check(fmt.Sprintf("flood-%x", rng.Uint64()), 1)
		if i%1000 == 0 {
			if got := s.Stats().Keys; got > maxKeys {
				t.Fatalf("after %d keys, %d stored, bound %d", i+1, got, maxKeys)
			}
		}
		now = now.Add(time.Microsecond)
	}
	st := s.Stats()
	if st.Keys > maxKeys || st.Keys < maxKeys*3/4 {
		t.Errorf("%d keys stored, want near (at most) %d", st.Keys, maxKeys)
	}
	if want := uint64(flood - st.Keys); st.Evictions+st.Expired != want {
		t.Errorf("evictions %d + expired %d, want %d", st.Evictions, st.Expired, want)
	}
	before := s.Stats().Keys
	for i := range 1000 { // peeks on new keys store nothing
		check(fmt.Sprintf("peek-%d", i), 0)
	}
	if got := s.Stats().Keys; got != before {
		t.Errorf("peeks changed the key count from %d to %d", before, got)
	}
}

// TestIdleStateExpires: states past their reset deadline are swept by later
// traffic, and the table is rebuilt once it has shrunk.
func TestIdleStateExpires(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newStore(t, Options{Shards: 1, Now: func() time.Time { return now }})
	lim := sluice.Limit{Rate: 5, Window: time.Second}
	var d sluice.Decision
	check := func(key string, lim sluice.Limit) {
		c := sluice.Check{Hits: []sluice.Hit{{Key: key, Limit: lim}}, Cost: 1}
		if err := s.Check(context.Background(), c, &d); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5000 {
		check(fmt.Sprintf("idle-%d", i), lim)
	}
	now = now.Add(2 * time.Second) // every state is now past its deadline
	// The later traffic records (checks that record take the lock and
	// count towards a sweep; denials decided without it do not: see peek).
	busy := sluice.Limit{Rate: 1_000_000, Window: time.Second}
	for i := 0; s.Stats().Keys > 100; i++ {
		if i > 10_000 { // 8 slots per sweep would need about 40,000
			t.Fatalf("after %d checks, %d idle states remain", i, s.Stats().Keys)
		}
		check("busy", busy)
	}
	if st := s.Stats(); st.Expired < 4900 || st.Evictions != 0 {
		t.Errorf("stats %+v, want about 5000 expired, no evictions", st)
	}
	if n := len(s.shards[0].slots); n > 1024 {
		t.Errorf("table not rebuilt: still %d slots", n)
	}
}

// TestSweepBacksOff: while sweeps find nothing expired, a shard sweeps
// ever more seldom, down to once every 1,024 checks; the first sweep that
// meets expired states brings it back to every 64 checks, and the idle
// states then go as fast as before the back-off.
func TestSweepBacksOff(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newStore(t, Options{Shards: 1, Now: func() time.Time { return now }})
	lim := sluice.Limit{Rate: 1_000_000, Window: time.Second}
	var d sluice.Decision
	check := func(key string) {
		c := sluice.Check{Hits: []sluice.Hit{{Key: key, Limit: lim}}, Cost: 1}
		if err := s.Check(context.Background(), c, &d); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5000 {
		check(fmt.Sprintf("live-%d", i))
	}
	sh := &s.shards[0]
	if sh.idle != maxIdle {
		t.Fatalf("after 5,000 checks on live states, idle = %d, want %d", sh.idle, maxIdle)
	}
	now = now.Add(2 * time.Second) // every state is now past its deadline
	for range sweepEvery << maxIdle {
		check("busy")
	}
	if st := s.Stats(); st.Expired == 0 || sh.idle != 0 {
		t.Fatalf("after 1,024 checks past the deadline: %d expired, idle = %d; want some expired, idle 0", st.Expired, sh.idle)
	}
	for i := 0; s.Stats().Keys > 100; i++ {
		if i > 10_000 { // as in TestIdleStateExpires
			t.Fatalf("after %d more checks, %d idle states remain", i, s.Stats().Keys)
		}
		check("busy")
	}
}

// TestMemoryPerKey measures the heap held per stored state, for the figures
// in the package doc.
func TestMemoryPerKey(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocates tens of MB; -race inflates the figures")
	}
	for _, a := range sluice.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			const n = 100_000
			now := time.Unix(1_700_000_000, 0)
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("key-%012d", i) // 16 bytes
			}
			lim := sluice.Limit{Rate: 100, Window: time.Minute, Algorithm: a}
			var d sluice.Decision
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			s := newStore(t, Options{Now: func() time.Time { return now }})
			for _, k := range keys {
				c := sluice.Check{Hits: []sluice.Hit{{Key: k, Limit: lim}}, Cost: 1}
				if err := s.Check(context.Background(), c, &d); err != nil {
					t.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			perKey := float64(m1.HeapAlloc-m0.HeapAlloc) / n
			t.Logf("%s: %.0f bytes per key (16-byte key, one event)", a, perKey)
			if perKey > 400 {
				t.Errorf("%.0f bytes per key, want <= 400", perKey)
			}
			runtime.KeepAlive(s)
		})
	}
}

// TestDefaultClock: without Options.Now the store follows the system
// clock, re-reading it once the anchor is a second old.
func TestDefaultClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t, Options{})
		for range 3 {
			if got, want := s.micros(), time.Now().UnixMicro(); got != want {
				t.Fatalf("micros() = %d, want %d", got, want)
			}
			first := s.anchor.Load()
			time.Sleep(700 * time.Millisecond)
			if got, want := s.micros(), time.Now().UnixMicro(); got != want {
				t.Fatalf("after 700ms: micros() = %d, want %d", got, want)
			}
			if s.anchor.Load() != first {
				t.Fatalf("re-anchored before a second")
			}
			time.Sleep(700 * time.Millisecond)
			if got, want := s.micros(), time.Now().UnixMicro(); got != want {
				t.Fatalf("after 1.4s: micros() = %d, want %d", got, want)
			}
			if s.anchor.Load() == first {
				t.Fatalf("not re-anchored after 1.4s")
			}
		}
	})
}

// TestDecideOneIsDecide holds decideOne, the single-hit path (each
// state's fused Check, on a copy of the state for those peek reads), to
// algo.Decide: for every algorithm, on random traffic (costs 0–3, shadow
// and not) both decide the same and leave the same state.
func TestDecideOneIsDecide(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		l := sluice.Limit{Rate: 20, Window: 10 * time.Second, Algorithm: a}
		p := algo.Params{Rate: l.Rate, Window: l.Window.Microseconds(), Bucket: l.Bucket().Microseconds()}
		rng := rand.New(rand.NewPCG(5, 6))
		for _, shadow := range []bool{false, true} {
			table, _ := ident.Lookup(string(a))
			fast, ref := newEntry(table.Code), table.New()
			now := int64(1_700_000_000_000_000)
			for i := range 20_000 {
				now += rng.Int64N(200_000)
				cost := rng.Int64N(4)
				var o algo.Outcome
				allowed := decideOne(fast, p, shadow, &o, now, cost)
				out := make([]algo.Outcome, 1)
				wantAllowed, _, _ := algo.Decide([]algo.Hit{{State: ref, Params: p, Shadow: shadow}}, out, now, cost)
				if allowed != wantAllowed || o != out[0] || !reflect.DeepEqual(fast.state(), ref) {
					t.Fatalf("%s: check %d (shadow %v, cost %d): decideOne %v %+v %+v, Decide %v %+v %+v",
						a, i, shadow, cost, allowed, o, fast.state(), wantAllowed, out[0], ref)
				}
			}
		}
	}
}

// TestCommonOneIsValid: the single-hit shortcut never accepts a check that
// Check.Validate refuses, and finds the algorithm code algoCode finds, on
// checks built from edge values of every field.
func TestCommonOneIsValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	pick := func(vs ...int64) int64 { return vs[rng.IntN(len(vs))] }
	algos := []sluice.Algorithm{"", sluice.SlidingWindow, sluice.Buckets, sluice.Log, sluice.Decay, sluice.GCRA, "nope", "Log"}
	keys := []string{"", "k", strings.Repeat("k", sluice.MaxKeyLen), strings.Repeat("k", sluice.MaxKeyLen+1)}
	accepted := 0
	for range 200_000 {
		l := sluice.Limit{
			Rate:       pick(-1, 0, 1, 7, sluice.MaxLogRate, sluice.MaxLogRate+1, sluice.MaxRate, sluice.MaxRate+1),
			Window:     time.Duration(pick(-1, 0, 1, 1000, 999_999, int64(time.Second), int64(10*time.Second)+1, int64(sluice.MaxWindow), int64(sluice.MaxWindow)+1000)),
			Algorithm:  algos[rng.IntN(len(algos))],
			Resolution: time.Duration(pick(0, -1000, 1, 1000, 1500, int64(time.Millisecond), int64(time.Second), int64(10*time.Second))),
		}
		c := sluice.Check{Hits: []sluice.Hit{{Key: keys[rng.IntN(len(keys))], Limit: l}}, Cost: pick(-1, 0, 1, 7, sluice.MaxLogRate+1, sluice.MaxRate)}
		if rng.IntN(20) == 0 {
			c.Hits = append(c.Hits, sluice.Hit{Key: "other", Limit: l})
		}
		code, ok := commonOne(&c)
		if !ok {
			continue
		}
		accepted++
		if err := c.Validate(); err != nil {
			t.Fatalf("commonOne accepts %+v, which Validate refuses: %v", c, err)
		}
		if want := algoCode(l.Algo()); code != want {
			t.Fatalf("commonOne(%+v) = code %d, want %d", c, code, want)
		}
	}
	if accepted < 1000 {
		t.Fatalf("commonOne accepted only %d checks: the test draws too few valid ones", accepted)
	}
}

// TestZeroStore: the zero Store is usable, with the default options.
func TestZeroStore(t *testing.T) {
	var s Store
	lim := sluice.Limit{Rate: 1, Window: time.Hour}
	var d sluice.Decision
	c := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: lim}}, Cost: 1}
	for i, want := range []bool{true, false} {
		if err := s.Check(context.Background(), c, &d); err != nil || d.Allowed != want {
			t.Fatalf("check %d: %v, allowed %v, want %v", i, err, d.Allowed, want)
		}
	}
	if got := len(s.shards); got != DefaultShards {
		t.Errorf("%d shards, want %d", got, DefaultShards)
	}
	var r Store
	if err := r.Reset(context.Background(), c); err != nil {
		t.Errorf("Reset of a zero Store: %v", err)
	}
	var st Store
	if got := st.Stats(); got != (Stats{}) {
		t.Errorf("Stats of a zero Store = %+v", got)
	}
	// Goroutines racing to be the first user set it up once (run with
	// -race): every one of their checks on one key is counted.
	var z Store
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d sluice.Decision
			c := sluice.Check{Hits: []sluice.Hit{{Key: "shared", Limit: sluice.Limit{Rate: 100, Window: time.Hour}}}, Cost: 1}
			for range 10 {
				if err := z.Check(context.Background(), c, &d); err != nil {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	peek := sluice.Check{Hits: []sluice.Hit{{Key: "shared", Limit: sluice.Limit{Rate: 100, Window: time.Hour}}}}
	if err := z.Check(context.Background(), peek, &d); err != nil || d.Hits[0].Used != 40 {
		t.Errorf("after 4 x 10 checks from a zero Store: %v, used %v, want 40", err, d.Hits[0].Used)
	}
}

// TestCodesAreIdent: memstore's algorithm codes are the table's, and each
// code's entry holds the state the table's constructor makes.
func TestCodesAreIdent(t *testing.T) {
	codes := map[byte]bool{codeWindow: true, codeBuckets: true, codeLog: true, codeDecay: true, codeGCRA: true}
	for _, a := range ident.Algos() {
		if !codes[a.Code] {
			t.Errorf("algorithm %s: code %q has no memstore constant", a.Name, a.Code)
		}
		delete(codes, a.Code)
		if got := algoCode(sluice.Algorithm(a.Name)); got != a.Code {
			t.Errorf("algoCode(%s) = %q, want %q", a.Name, got, a.Code)
		}
		e := newEntry(a.Code)
		if got, want := reflect.TypeOf(e.state()), reflect.TypeOf(a.New()); got != want {
			t.Errorf("algorithm %s: entry holds %v, the table makes %v", a.Name, got, want)
		}
	}
	if len(codes) > 0 {
		t.Errorf("memstore codes not in the table: %v", codes)
	}
}

// TestIdentityIsIdent: the identity a check stores its state under is the
// shared ident.State, built as package ident documents, for single- and
// multi-hit checks of every algorithm, with and without a group, zone and
// bucket length: the state a check created is found under that State's
// hash and identity. And an entry tells apart every identity that differs
// from its own in one field.
func TestIdentityIsIdent(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newStore(t, Options{Now: func() time.Time { return now }})
	var d sluice.Decision
	for _, a := range sluice.Algorithms() {
		for _, res := range []time.Duration{0, 6 * time.Second} {
			for _, group := range []string{"", "g"} {
				for _, zone := range []string{"", "z"} {
					h := sluice.Hit{Zone: zone, Key: fmt.Sprint("k-", a, res, group), Limit: sluice.Limit{Rate: 5, Window: time.Minute, Algorithm: a, Resolution: res}}
					other := sluice.Hit{Zone: zone, Key: h.Key, Limit: sluice.Limit{Rate: 5, Window: time.Hour}}
					for _, hits := range [][]sluice.Hit{{h}, {h, other}} {
						c := sluice.Check{Hits: hits, Group: group, Cost: 1}
						if c.Validate() != nil {
							continue
						}
						if err := s.Reset(context.Background(), c); err != nil {
							t.Fatal(err)
						}
						if err := s.Check(context.Background(), c, &d); err != nil {
							t.Fatal(err)
						}
						want := stateKey{State: ident.State{Zone: h.Zone, Key: h.Key, Group: group,
							Limit: ident.LimitOf(string(h.Limit.Algo()), h.Limit.Window, h.Limit.Bucket())}}
						kh := s.keyHash(group, zone, h.Key)
						if s.shards[kh&s.mask].find(stateHash(kh, &want), &want) == nil {
							t.Errorf("%s, resolution %v, group %q, zone %q, %d hits: no state under %+v", a, res, group, zone, len(hits), want.State)
						}
					}
				}
			}
		}
	}
	base := stateKey{State: ident.State{Zone: "z", Key: "k", Group: "g", Limit: ident.Limit{Code: codeBuckets, Window: 60, Bucket: 6}}}
	e := newEntry(codeBuckets)
	e.setID(&base)
	if !e.is(&base) {
		t.Fatalf("an entry is not its own identity")
	}
	for name, change := range map[string]func(k *stateKey){
		"zone":      func(k *stateKey) { k.Zone = "y" },
		"key":       func(k *stateKey) { k.Key = "j" },
		"group":     func(k *stateKey) { k.Group = "f" },
		"no group":  func(k *stateKey) { k.Group, k.Zone = "", "gz" },
		"algorithm": func(k *stateKey) { k.Limit.Code = codeWindow },
		"window":    func(k *stateKey) { k.Limit.Window = 61 },
		"bucket":    func(k *stateKey) { k.Limit.Bucket = 5 },
	} {
		k := base
		change(&k)
		if e.is(&k) {
			t.Errorf("another %s: the entry takes %+v for %+v", name, k.State, base.State)
		}
	}
}

// TestHitsOwnLines checks that a Decision the store gives storage to gets
// its results in cache lines no other object shares: every one at a
// multiple of 128 bytes (the 128-byte size class), where the 48-byte class
// of a single result would put most of them mid-line beside another's.
// Two callers on two cores writing their results to one line would move
// it between the cores on every check.
func TestHitsOwnLines(t *testing.T) {
	s := newStore(t, Options{})
	l := sluice.Limit{Rate: 100, Window: time.Minute, Algorithm: sluice.Decay}
	if n := lineHits * int(unsafe.Sizeof(sluice.HitResult{})); n <= 112 || n > 128 {
		t.Fatalf("lineHits results take %d bytes, want 113 to 128 (the 128-byte size class)", n)
	}
	ds := make([]*sluice.Decision, 64)
	for i := range ds {
		ds[i] = new(sluice.Decision)
		if err := s.Check(context.Background(), sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: l}}, Cost: 1}, ds[i]); err != nil {
			t.Fatal(err)
		}
		if p := uintptr(unsafe.Pointer(&ds[i].Hits[0])); p%128 != 0 || cap(ds[i].Hits) != lineHits {
			t.Fatalf("decision %d: results at %#x (mod 128: %d), capacity %d; want a multiple of 128 and %d", i, p, p%128, cap(ds[i].Hits), lineHits)
		}
	}
}
