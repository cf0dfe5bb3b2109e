package top

import (
	"github.com/sluicehq/sluice/internal/keyname"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// clock is a settable clock for trackers.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.Unix(1_700_000_000, 0)} }
func tracker(t *testing.T, o Options) *Tracker {
	t.Helper()
	tr, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestAccuracyZipf checks the stated error bound against an exact count
// on a skewed trace: 200,000 checks over 100,000 keys drawn from a Zipf
// law, each bucket of the window getting its share, in a tracker of one
// shard and one of three (each observation in a shard drawn at random, as
// goroutines on several Ps would spread them).
func TestAccuracyZipf(t *testing.T) {
	for _, tc := range []struct {
		name     string
		s        float64
		capacity int
	}{{"s=1.1,k=64", 1.1, 64}, {"s=1.5,k=16", 1.5, 16}, {"s=1.01,k=256", 1.01, 256}} {
		for _, shards := range []int{1, 3} {
			t.Run(tc.name+",shards="+strconv.Itoa(shards), func(t *testing.T) {
				clk := newClock()
				// No flood sampling: this is the Space-Saving bound alone
				// (TestFloodAccuracy tests the two together).
				tr, err := newTracker(Options{Capacity: tc.capacity, Buckets: 4, Period: 4 * time.Second, Now: clk.now, Budget: 1 << 30}, shards)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(1, 2))
				zipf := rand.NewZipf(rng, tc.s, 1, 99_999)
				exact := map[string]int64{}
				const n = 200_000
				for i := range n {
					if i%(n/4) == 0 && i > 0 {
						clk.add(time.Second) // the next bucket
					}
					k := "client-" + strconv.FormatUint(zipf.Uint64(), 10)
					cost := int64(1 + i%3)
					exact[k] += cost
					tr.observeIn(uint(rng.IntN(shards)), k, Allowed, cost, 0, 1) // as if from any of the Ps
				}
				snap := tr.Snapshot(tc.capacity * 4 * shards)
				var total int64
				for _, c := range exact {
					total += c
				}
				if snap.AdmittedTotal != total {
					t.Fatalf("AdmittedTotal = %d, want %d", snap.AdmittedTotal, total)
				}
				bound := total / int64(tc.capacity)
				byID := map[string]string{}
				for k := range exact {
					byID[tr.ID(k)] = k
				}
				listed := map[string]bool{}
				for _, k := range snap.Admitted {
					key := byID[k.ID]
					listed[key] = true
					if d := k.Count - exact[key]; d > bound || -d > bound {
						t.Errorf("%s: count %d, exact %d: off by %d, bound %d", key, k.Count, exact[key], d, bound)
					}
					if k.Count-k.Error > exact[key] {
						t.Errorf("%s: count %d - error %d exceeds the exact %d", key, k.Count, k.Error, exact[key])
					}
				}
				for k, c := range exact {
					if c > bound && !listed[k] {
						t.Errorf("%s: exact %d > bound %d but not listed", k, c, bound)
					}
				}
				// The top 5 by estimate are the exact top 5.
				keys := make([]string, 0, len(exact))
				for k := range exact {
					keys = append(keys, k)
				}
				slices.SortFunc(keys, func(a, b string) int { return int(exact[b] - exact[a]) })
				for i := range 5 {
					if got := byID[snap.Admitted[i].ID]; got != keys[i] {
						t.Errorf("top[%d] = %s (count %d), exact top[%d] = %s (%d)", i, got, snap.Admitted[i].Count, i, keys[i], exact[keys[i]])
					}
				}
				t.Logf("N=%d bound N/k=%d, top count %d exact %d", total, bound, snap.Admitted[0].Count, exact[keys[0]])
			})
		}
	}
}

// TestWindowSlides checks that counts leave the lists with their bucket
// and that a denial streak keeps its start across buckets.
func TestWindowSlides(t *testing.T) {
	clk := newClock()
	tr := tracker(t, Options{Capacity: 8, Buckets: 4, Period: 4 * time.Second, Now: clk.now})
	start := clk.t
	for range 4 { // denied once a second for 4 s
		tr.Observe("hot", Denied, 1, 1)
		clk.add(time.Second)
	}
	clk.add(-time.Second)
	snap := tr.Snapshot(10)
	if len(snap.Denied) != 1 || snap.Denied[0].Count != 4 {
		t.Fatalf("denied = %+v, want hot with 4", snap.Denied)
	}
	if got := snap.Denied[0].Since; !got.Equal(start) {
		t.Errorf("since = %v, want the first denial %v", got, start)
	}
	clk.add(2 * time.Second) // two buckets later: two denials left
	if snap = tr.Snapshot(10); len(snap.Denied) != 1 || snap.Denied[0].Count != 2 {
		t.Fatalf("after 2 s: denied = %+v, want hot with 2", snap.Denied)
	}
	clk.add(time.Hour)
	if snap = tr.Snapshot(10); len(snap.Denied) != 0 || snap.DeniedTotal != 0 {
		t.Fatalf("an hour later: denied = %+v, total %d, want none", snap.Denied, snap.DeniedTotal)
	}
	tr.Observe("hot", Denied, 1, 1)
	if got := tr.Snapshot(10).Denied[0].Since; !got.Equal(clk.t) {
		t.Errorf("a new streak: since = %v, want %v", got, clk.t)
	}
}

// TestLists checks what each result adds to which list, and the
// per-second counts.
func TestLists(t *testing.T) {
	clk := newClock()
	tr := tracker(t, Options{Now: clk.now, ShowKeys: true})
	tr.Observe("a", Allowed, 5, 0.5)      // admitted only
	tr.Observe("b", Allowed, 1, 0.9)      // admitted and near
	tr.Observe("c", Denied, 1, 1)         // denied only
	tr.Observe("d", ShadowDenied, 2, 1.2) // denied (shadow), admitted and near
	tr.Observe("e", Refused, 1, 0.95)     // counted as denied, listed nowhere
	snap := tr.Snapshot(10)
	names := func(ks []Key) (out []string) {
		for _, k := range ks {
			out = append(out, k.Key)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		list string
		got  []string
		want []string
	}{
		{"admitted", names(snap.Admitted), []string{"a", "b", "d"}},
		{"denied", names(snap.Denied), []string{"c", "d"}},
		{"near", names(snap.Near), []string{"b", "d"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.list, tc.got, tc.want)
		}
	}
	for _, k := range snap.Denied {
		if k.Shadow != (k.Key == "d") {
			t.Errorf("denied %s: shadow = %v", k.Key, k.Shadow)
		}
	}
	last := snap.Seconds[len(snap.Seconds)-1]
	if want := (Second{Unix: clk.t.Unix(), Allowed: 2, Denied: 2, ShadowDenied: 1}); last != want {
		t.Errorf("last second = %+v, want %+v", last, want)
	}
	if got, want := len(snap.Seconds), int(DefaultHistory/time.Second); got != want {
		t.Errorf("%d seconds of history, want %d", got, want)
	}
}

// TestKeysHidden checks that keys appear only as digests unless ShowKeys,
// and that Lookup finds a listed key by its ID and Forget removes it.
func TestKeysHidden(t *testing.T) {
	tr := tracker(t, Options{})
	secret := "Bearer sk_live_0123456789"
	long := strings.Repeat("x", KeyBytes+1)
	tr.Observe(secret, Denied, 1, 1)
	tr.Observe(long, Denied, 1, 1)
	snap := tr.Snapshot(10)
	for _, k := range snap.Denied {
		if k.Key != "" {
			t.Errorf("key shown without ShowKeys: %q", k.Key)
		}
	}
	for _, tc := range []struct {
		key        string
		resettable bool
	}{{secret, true}, {long, false}} {
		i := slices.IndexFunc(snap.Denied, func(k Key) bool { return k.ID == tr.ID(tc.key) })
		if i < 0 {
			t.Fatalf("%s not listed by its digest: %+v", tr.ID(tc.key), snap.Denied)
		}
		if snap.Denied[i].Resettable != tc.resettable {
			t.Errorf("%s: resettable = %v, want %v", snap.Denied[i].ID, snap.Denied[i].Resettable, tc.resettable)
		}
		got, ok := tr.Lookup(tr.ID(tc.key))
		if ok != tc.resettable || ok && got != tc.key {
			t.Errorf("Lookup(%s) = %q, %v", tr.ID(tc.key), got, ok)
		}
	}
	tr.Forget(secret)
	if snap = tr.Snapshot(10); len(snap.Denied) != 1 || snap.Denied[0].ID != tr.ID(long) {
		t.Errorf("after Forget: %+v, want only the long key", snap.Denied)
	}
}

// TestKeyedIDs checks that a key's ID is an HMAC under the tracker's
// DigestKey: the same for two trackers with one DigestKey, another under
// another key, never the key's plain SHA-256, and what openssl's
// "dgst -sha256 -hmac" prints for it.
func TestKeyedIDs(t *testing.T) {
	secret := []byte("0123456789abcdef")
	a, b := tracker(t, Options{DigestKey: secret}), tracker(t, Options{DigestKey: secret})
	other, random := tracker(t, Options{DigestKey: []byte("fedcba9876543210")}), tracker(t, Options{})
	const key = "203.0.113.9"
	// printf %s 203.0.113.9 | openssl dgst -sha256 -hmac 0123456789abcdef -r | cut -c1-16
	want := "hmac:6c12fd2b48792833"
	if got := a.ID(key); got != want {
		t.Errorf("ID(%q) = %s, want %s", key, got, want)
	}
	if a.ID(key) != b.ID(key) {
		t.Errorf("one DigestKey, two IDs: %s, %s", a.ID(key), b.ID(key))
	}
	for _, tr := range []*Tracker{other, random} {
		if id := tr.ID(key); id == want || id == keyname.Of(key) || !strings.HasPrefix(id, "hmac:") || len(id) != len(want) {
			t.Errorf("ID under another key = %s; want another hmac: ID, not %s nor %s", id, want, keyname.Of(key))
		}
	}
	long := strings.Repeat("y", KeyBytes+1)
	if a.ID(long) != b.ID(long) || a.ID(long) == other.ID(long) || a.ID(long) == a.ID(long[:KeyBytes]) {
		t.Errorf("long key IDs %s, %s, %s, short %s: want the first two equal, the others not", a.ID(long), b.ID(long), other.ID(long), a.ID(long[:KeyBytes]))
	}
	a.Observe(key, Denied, 1, 1)
	if snap := a.Snapshot(1); len(snap.Denied) != 1 || snap.Denied[0].ID != want {
		t.Errorf("listed as %+v, want ID %s", snap.Denied, want)
	}
	if _, err := New(Options{DigestKey: []byte("short")}); err == nil {
		t.Errorf("New with a 5-byte DigestKey: no error")
	}
}

// TestSummaryChurn drives summaries through many insertions, removals
// and take-overs, with unit and varied weights, and checks that their
// index stays consistent and that every take-over took a counter with
// the smallest count (what the Space-Saving bound rests on).
func TestSummaryChurn(t *testing.T) {
	for _, maxWeight := range []int{1, 3, 100} {
		t.Run("weights-1-to-"+strconv.Itoa(maxWeight), func(t *testing.T) {
			s := newSummary(16)
			rng := rand.New(rand.NewPCG(3, uint64(maxWeight)))
			for i := range 100_000 {
				h := rng.Uint64N(64) * 0x9e3779b97f4a7c15 // collide in the index
				if i%7 == 0 {
					s.remove(h)
				} else {
					addChecked(t, s, &obs{hash: h, key: "k", weight: 1 + int64(rng.IntN(maxWeight))})
				}
				if i%1000 == 0 {
					checkSummary(t, s)
				}
			}
			checkSummary(t, s)
		})
	}
}

// addChecked adds o to s and checks that a key new to s took over a
// counter whose count was the smallest, and that the total grew by the
// weight.
func addChecked(t *testing.T, s *summary, o *obs) {
	t.Helper()
	total, counted := s.total, s.find(o.hash) != nil
	smallest := slices.Min(s.counts)
	s.add(o)
	if s.total != total+o.weight {
		t.Fatalf("total %d after adding %d to %d", s.total, o.weight, total)
	}
	if counted {
		return
	}
	e := s.find(o.hash)
	if e == nil {
		t.Fatalf("a new key is not counted after add")
	}
	if e.err != smallest {
		t.Fatalf("a new key took over a counter of %d; the smallest was %d", e.err, smallest)
	}
}

func checkSummary(t *testing.T, s *summary) {
	t.Helper()
	indexed := 0
	for i, x := range s.index {
		if x.x == 0 {
			continue
		}
		indexed++
		e := &s.entries[x.x-1]
		if s.counts[x.x-1] == 0 || e.hash != x.hash {
			t.Fatalf("slot %d indexes a free entry, or under another hash", i)
		}
		if got := s.find(e.hash); got != e {
			t.Fatalf("find(%x) does not return its entry", e.hash)
		}
	}
	used := 0
	for _, c := range s.counts {
		if c > 0 {
			used++
		}
		if len(s.mins) > 0 && c < s.min {
			t.Fatalf("a count of %d is below min %d while mins holds %d entries", c, s.min, len(s.mins))
		}
	}
	if used != indexed {
		t.Fatalf("%d entries in use, %d indexed", used, indexed)
	}
}

// TestBytes checks that the memory held does not grow with the keys.
func TestBytes(t *testing.T) {
	tr := tracker(t, Options{})
	before := tr.Bytes()
	for i := range 10_000 {
		tr.Observe(strconv.Itoa(i), Denied, 1, 1)
	}
	if after := tr.Bytes(); after != before {
		t.Errorf("Bytes grew from %d to %d", before, after)
	}
	t.Logf("a tracker with the defaults holds %d bytes", before)
}

// TestSampledAccuracy checks the admitted list of a Set sampling one
// allowed check in 32 against the exact cost on a Zipf trace: each of the
// top 10 is within the Space-Saving bound plus 5 standard deviations of
// the sampling (sqrt(Sample × cost) for unit costs), and the top 3 are
// the exact top 3.
func TestSampledAccuracy(t *testing.T) {
	clk := newClock()
	set, err := NewSet(Options{Sample: 32, Now: clk.now, Budget: 1 << 30}) // the draw of Sample alone
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Configure(map[string]bool{"api": true}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	zipf := rand.NewZipf(rng, 1.2, 1, 99_999)
	exact := map[string]int64{}
	var d sluice.Decision
	const n = 400_000
	for range n {
		k := "client-" + strconv.FormatUint(zipf.Uint64(), 10)
		exact[k]++
		c := sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: k, Limit: sluice.Limit{Rate: 1 << 40, Window: time.Hour}}}, Cost: 1}
		d.Prepare(1)
		d.Allowed, d.Hits[0].Allowed, d.Hits[0].Used = true, true, 1
		set.Observe(c, &d)
	}
	snap := set.Tracker("api").Snapshot(10)
	// One check in 32 drawn, each standing for 32: the total is n within
	// 5 standard deviations of the draw.
	if diff, tol := math.Abs(float64(snap.AdmittedTotal-n)), 5*math.Sqrt(32*n); diff > tol {
		t.Errorf("sampled total %d, want %d within %.0f", snap.AdmittedTotal, n, tol)
	}
	bound := float64(snap.AdmittedTotal) / float64(snap.Capacity)
	keys := slices.SortedFunc(func(yield func(string) bool) {
		for k := range exact {
			if !yield(k) {
				return
			}
		}
	}, func(a, b string) int { return int(exact[b] - exact[a]) })
	for i, k := range snap.Admitted {
		tol := bound + 5*math.Sqrt(32*float64(exact[k.Key]))
		if diff := math.Abs(float64(k.Count - exact[k.Key])); diff > tol {
			t.Errorf("%s: estimate %d, exact %d: off by %.0f > %.0f", k.Key, k.Count, exact[k.Key], diff, tol)
		}
		if i < 3 && k.Key != keys[i] {
			t.Errorf("top[%d] = %s, exact top[%d] = %s", i, k.Key, i, keys[i])
		}
	}
	t.Logf("N=%d (sampled total %d), top %s estimate %d exact %d", n, snap.AdmittedTotal, snap.Admitted[0].Key, snap.Admitted[0].Count, exact[snap.Admitted[0].Key])
}

// TestSecondsFollowTheClock checks the per-second counts when the clock
// moves within a second, to the next one, back to the previous one, and
// around the whole history (the slot of an old second is cleared).
func TestSecondsFollowTheClock(t *testing.T) {
	clk := newClock()
	tr := tracker(t, Options{History: 3 * time.Second, Now: clk.now})
	step := func(d time.Duration) {
		clk.add(d)
		tr.Observe("k", Denied, 1, 1)
	}
	step(500 * time.Millisecond)  // second 0
	step(400 * time.Millisecond)  // second 0
	step(200 * time.Millisecond)  // second 1
	step(-300 * time.Millisecond) // back to second 0
	counts := func() []int64 {
		var got []int64
		for _, s := range tr.Snapshot(1).Seconds {
			got = append(got, s.Denied)
		}
		return got
	}
	clk.add(300 * time.Millisecond) // second 1 again
	if got := counts(); !slices.Equal(got, []int64{0, 3, 1}) {
		t.Errorf("denials per second = %v, want [0 3 1]", got)
	}
	step(3 * time.Second) // second 4, in the slot of second 1
	if got := counts(); !slices.Equal(got, []int64{0, 0, 1}) {
		t.Errorf("3 s later: denials per second = %v, want [0 0 1]", got)
	}
}

// TestFloodAccuracy checks the lists under a flood of denials beyond
// Options.Budget against an exact count: 2,000,000 denials over 50,000
// keys drawn from a Zipf law (s=1.1), 100,000 a second for 20 s, into a
// tracker of one shard with a budget of 2,000 observations a second and
// one bucket of 20 s. The shard must sample (observing at most about
// 2 × Budget a second, plus one Budget per doubling in the first
// second), and each of the top 10 keys' counts must lie within the
// stated bound: N/Capacity plus 5 standard deviations of the draw,
// sqrt(2^shift × count), with the top 3 the exact top 3 and the total
// within 5 standard deviations of the truth.
func TestFloodAccuracy(t *testing.T) {
	clk := newClock()
	const budget, perSecond, seconds = 2000, 100_000, 20
	tr, err := newTracker(Options{Capacity: 64, Buckets: 1, Period: seconds * time.Second, Now: clk.now, Budget: budget}, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	zipf := rand.NewZipf(rng, 1.1, 1, 49_999)
	exact := map[string]int64{}
	for range seconds {
		for range perSecond {
			k := "client-" + strconv.FormatUint(zipf.Uint64(), 10)
			exact[k]++
			tr.observeIn(0, k, Denied, 1, 1, 1)
			clk.add(time.Second / perSecond)
		}
	}
	clk.add(-time.Second / perSecond) // still in the bucket
	sh := &tr.shards[0]
	shift := tr.shift(sh)
	// At most maxShift+1 budgets in the first second (one per doubling),
	// then about one budget a second once the shift is set from a whole
	// second: twice that allows for the draw's spread.
	if max := int64(budget*(maxShift+1) + 2*budget*(seconds-1)); sh.observedTotal > max || shift == 0 {
		t.Errorf("observed %d of %d denials (shift %d), want at most %d and sampling", sh.observedTotal, perSecond*seconds, shift, max)
	}
	snap := tr.Snapshot(10)
	if snap.Sampling != int64(1)<<shift {
		t.Errorf("snapshot sampling %d, want %d", snap.Sampling, int64(1)<<shift)
	}
	n := float64(perSecond * seconds)
	q := float64(int64(1) << shift)
	if diff, tol := math.Abs(float64(snap.DeniedTotal)-n), 5*math.Sqrt(q*n); diff > tol {
		t.Errorf("denied total %d, want %.0f within %.0f", snap.DeniedTotal, n, tol)
	}
	byID := map[string]string{}
	for k := range exact {
		byID[tr.ID(k)] = k
	}
	keys := slices.SortedFunc(func(yield func(string) bool) {
		for k := range exact {
			if !yield(k) {
				return
			}
		}
	}, func(a, b string) int { return int(exact[b] - exact[a]) })
	bound := float64(snap.DeniedTotal) / float64(snap.Capacity)
	for i, k := range snap.Denied {
		key := byID[k.ID]
		tol := bound + 5*math.Sqrt(q*float64(exact[key]))
		if diff := math.Abs(float64(k.Count - exact[key])); diff > tol {
			t.Errorf("%s: estimate %d, exact %d: off by %.0f > %.0f", key, k.Count, exact[key], diff, tol)
		}
		if i < 3 && key != keys[i] {
			t.Errorf("top[%d] = %s, exact top[%d] = %s", i, key, i, keys[i])
		}
	}
	last := snap.Seconds[len(snap.Seconds)-2] // the last whole second
	if diff, tol := math.Abs(float64(last.Denied-perSecond)), 5*math.Sqrt(q*perSecond); diff > tol {
		t.Errorf("denials in the last whole second: %d, want %d within %.0f", last.Denied, perSecond, tol)
	}
	t.Logf("observed %d of %.0f (shift %d); N/k = %.0f; top %s estimate %d exact %d", sh.observedTotal, n, shift, bound, byID[snap.Denied[0].ID], snap.Denied[0].Count, exact[keys[0]])
}

// TestBudgetExactBelow checks that below the budget nothing is sampled:
// 1,000 denials a second for 5 s against a budget of 4,096 are all
// counted, exactly.
func TestBudgetExactBelow(t *testing.T) {
	clk := newClock()
	tr, err := newTracker(Options{Buckets: 1, Period: 10 * time.Second, Now: clk.now, ShowKeys: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		tr.observeIn(0, "k"+strconv.Itoa(i%10), Denied, 1, 1, 1)
		clk.add(time.Millisecond)
	}
	snap := tr.Snapshot(10)
	if snap.DeniedTotal != 5000 || tr.shards[0].observedTotal != 5000 || len(snap.Denied) != 10 || snap.Sampling != 1 {
		t.Fatalf("denied total %d, observed %d, %d keys, sampling %d; want 5000, 5000, 10, 1", snap.DeniedTotal, tr.shards[0].observedTotal, len(snap.Denied), snap.Sampling)
	}
	for _, k := range snap.Denied {
		if k.Count != 500 || k.Error != 0 {
			t.Errorf("%s: count %d error %d, want 500 and 0", k.Key, k.Count, k.Error)
		}
	}
}

// TestFloodLapses checks that a shard's sampling ends with its flood: a
// flood of denials, then 5 s without any (the flood leaves the window),
// then 20 denials of new keys at a trickle (one each 10 ms) are all
// counted, exactly; and that the snapshot says so.
func TestFloodLapses(t *testing.T) {
	clk := newClock()
	tr, err := newTracker(Options{Buckets: 4, Period: 4 * time.Second, Now: clk.now, Budget: 100, ShowKeys: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200_000 { // 100,000 a second for 2 s
		tr.observeIn(0, "flood-"+strconv.Itoa(i%1000), Denied, 1, 1, 1)
		clk.add(10 * time.Microsecond)
	}
	if got := tr.Snapshot(1).Sampling; got < 2 {
		t.Fatalf("sampling %d during the flood, want at least 2", got)
	}
	clk.add(5 * time.Second)
	if got := tr.Snapshot(1).Sampling; got != 1 {
		t.Errorf("sampling %d 5 s after the flood, want 1", got)
	}
	for i := range 20 {
		tr.observeIn(0, "trickle-"+strconv.Itoa(i), Denied, 1, 1, 1)
		clk.add(10 * time.Millisecond)
	}
	snap := tr.Snapshot(1000)
	n := 0
	for _, k := range snap.Denied {
		if strings.HasPrefix(k.Key, "trickle-") {
			n++
			if k.Count != 1 {
				t.Errorf("%s: count %d, want 1", k.Key, k.Count)
			}
		}
	}
	if n != 20 {
		t.Errorf("%d of the 20 trickling keys listed, want all", n)
	}
}
