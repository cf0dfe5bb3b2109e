package top

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
)

// TestSetRunClock checks, in a bubble of fake time, that a running Set's
// trackers take their time from its clock (read every Tick), that the
// per-second counts follow it, and that after Run returns observations
// read Now again.
func TestSetRunClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set, err := NewSet(Options{Sample: 1, Tick: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := set.Configure(map[string]bool{"z": true}); err != nil {
			t.Fatal(err)
		}
		tr := set.Tracker("z")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { set.Run(ctx); close(done) }()
		synctest.Wait()
		start := time.Now()
		tr.Observe("a", Denied, 1, 1)
		time.Sleep(2*time.Second + 50*time.Millisecond) // the clock has ticked 20 times
		tr.Observe("a", Denied, 1, 1)
		snap := tr.Snapshot(1)
		if got := snap.Denied[0].Last.Sub(start); got != 2*time.Second {
			t.Errorf("last observation %v after the first, want 2s (the clock's last tick)", got)
		}
		var per []int64
		for _, s := range snap.Seconds[len(snap.Seconds)-3:] {
			per = append(per, s.Denied)
		}
		if per[0] != 1 || per[2] != 1 {
			t.Errorf("denials in the last 3 seconds = %v, want [1 0 1]", per)
		}
		cancel()
		<-done
		time.Sleep(30 * time.Millisecond)
		tr.Observe("a", Denied, 1, 1)
		if got := tr.Snapshot(1).Denied[0].Last.Sub(start); got != 2*time.Second+80*time.Millisecond {
			t.Errorf("after Run: last observation at %v, want 2.08s (Now itself)", got)
		}
	})
}

// TestSetRunLapsesFloods checks, in a bubble of fake time, that a running
// Set ends a shard's flood sampling (Options.Budget) once it lapsed: a
// flood of denials puts the shard under sampling, and two seconds of
// nothing later the clock's tick has cleared it, so that a single denial
// then costs no clock read and is counted.
func TestSetRunLapsesFloods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set, err := NewSet(Options{Sample: 1, Budget: 10, Tick: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := set.Configure(map[string]bool{"z": true}); err != nil {
			t.Fatal(err)
		}
		tr := set.Tracker("z")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { set.Run(ctx); close(done) }()
		synctest.Wait()
		for range 1000 {
			tr.observeIn(0, "hot", Denied, 1, 1, 1)
		}
		if f := tr.shards[0].flood.Load(); f == 0 {
			t.Fatalf("no flood after 1000 denials in a second against a budget of 10")
		}
		time.Sleep(2100 * time.Millisecond)
		if f := tr.shards[0].flood.Load(); f != 0 {
			t.Errorf("flood %#x still set 2.1 s later, want it lapsed by the clock's tick", f)
		}
		before := tr.Snapshot(1).DeniedTotal
		tr.observeIn(0, "hot", Denied, 1, 1, 1)
		if got := tr.Snapshot(1).DeniedTotal - before; got != 1 {
			t.Errorf("a denial after the flood added %d, want 1", got)
		}
		cancel()
		<-done
	})
}

// TestLimiterFloodFloor checks, in a bubble of fake time, a Limiter's
// draw before the tracker lookup under a flood (Set.floor): a Zipf flood
// of denials from one goroutine through a real memory store raises the
// set's floor, though the tracker has MaxShards shards whatever
// GOMAXPROCS and the goroutine's processor leaves the others idle; the
// denials counted stay within the sampling error of the exact count
// (in total and for each top key, the first the exact first), and
// once the flood has lapsed the floor is 0 again and a single denial is
// counted.
func TestLimiterFloodFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 50,000 denials a second against a budget of 1,000: a shift of
		// 5 or 6, so that client-0 (about 15,000 denials) is drawn some
		// 250 times or more and client-1 (7,000) 110, 8 standard
		// deviations apart.
		set, err := NewSet(Options{Capacity: 64, Buckets: 1, Period: 30 * time.Second, Budget: 1000, Tick: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		set.shards = MaxShards
		if err := set.Configure(map[string]bool{"api": true}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { set.Run(ctx); close(done) }()
		synctest.Wait()
		l := &Limiter{Next: newMemstore(t), Set: set}
		limit := sluice.Limit{Rate: 1, Window: time.Hour} // denied after the first check
		rng := rand.New(rand.NewPCG(21, 22))
		zipf := rand.NewZipf(rng, 1.1, 1, 9_999)
		exact := map[string]int64{}
		var denied int64
		var d sluice.Decision
		floor := uint32(0)
		for range 200 { // 2 s of fake time, 500 checks every 10 ms
			for range 500 {
				k := "client-" + strconv.FormatUint(zipf.Uint64(), 10)
				if err := l.Check(ctx, sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: k, Limit: limit}}, Cost: 1}, &d); err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					exact[k]++
					denied++
				}
			}
			time.Sleep(10 * time.Millisecond)
			floor = max(floor, set.floor.Load())
		}
		if floor == 0 {
			t.Fatalf("the set's floor stayed 0 under %d denials a second against a budget of 1000 (sampling %d)", denied/2, set.Tracker("api").Snapshot(1).Sampling)
		}
		snap := set.Tracker("api").Snapshot(3)
		q := float64(2 * snap.Sampling) // the shift moves within a second
		if diff, tol := math.Abs(float64(snap.DeniedTotal-denied)), 5*math.Sqrt(q*float64(denied)); diff > tol {
			t.Errorf("denied total %d, exact %d: off by %.0f > %.0f (floor up to %d, sampling %d)", snap.DeniedTotal, denied, diff, tol, floor, snap.Sampling)
		}
		bound := float64(snap.DeniedTotal) / float64(snap.Capacity)
		for i, k := range snap.Denied {
			// Zipf: the exact top key is client-0, twice the next; the
			// sampling (32 or 64) may swap the next ones, close in count.
			key := k.Key
			if i == 0 && key != "client-0" {
				t.Errorf("top[0] = %s, want client-0", key)
			}
			if diff, tol := math.Abs(float64(k.Count-exact[key])), bound+5*math.Sqrt(q*float64(exact[key])); diff > tol {
				t.Errorf("%s: estimate %d, exact %d: off by %.0f > %.0f", key, k.Count, exact[key], diff, tol)
			}
		}
		time.Sleep(3 * time.Second) // the floods lapse, the clock's tick lowers the floor
		if f := set.floor.Load(); f != 0 {
			t.Errorf("floor %d 3 s after the flood, want 0", f)
		}
		before := set.Tracker("api").Snapshot(1).DeniedTotal
		if err := l.Check(ctx, sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: "client-0", Limit: limit}}, Cost: 1}, &d); err != nil || d.Allowed {
			t.Fatalf("check = %v, %v; want denied", d.Allowed, err)
		}
		if got := set.Tracker("api").Snapshot(1).DeniedTotal - before; got != 1 {
			t.Errorf("a denial after the flood added %d, want 1", got)
		}
		cancel()
		<-done
	})
}

// TestSetFloorIdleShards checks, in a bubble of fake time, how a running
// Set's floor follows the shards of its tracker: a flood on one shard of
// four raises it while the other three are idle; a trickle on another
// shard lowers it at once (its first observation of the second) and holds
// it at 0 while that shard is active; once the trickle has been idle for
// a second the floor rises again to the flooded shard's shift.
func TestSetFloorIdleShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set, err := NewSet(Options{Sample: 1, Budget: 20, Tick: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		set.shards = 4
		if err := set.Configure(map[string]bool{"z": true}); err != nil {
			t.Fatal(err)
		}
		tr := set.Tracker("z")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { set.Run(ctx); close(done) }()
		synctest.Wait()
		flood := func() { // 1000 denials in 100 ms, on shard 0
			for range 10 {
				for range 100 {
					tr.observeIn(0, "hot", Denied, 1, 1, 1)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		for range 20 { // 2 s
			flood()
		}
		shift := uint32(tr.shards[0].flood.Load() & 0xff)
		if shift == 0 {
			t.Fatalf("shard 0 not flooded after 10,000 denials a second against a budget of 20")
		}
		// The shift may have risen since the last tick, not the floor.
		if f := set.floor.Load(); f == 0 || f > shift {
			t.Errorf("floor %d with shards 1-3 idle, want 1 to shard 0's shift %d", f, shift)
		}
		tr.observeIn(2, "quiet", Denied, 1, 1, 1)
		if f := set.floor.Load(); f != 0 {
			t.Errorf("floor %d right after an idle shard observed, want 0", f)
		}
		for range 10 { // 1 s, a trickle on shard 2: 10 a second, within the budget
			flood()
			tr.observeIn(2, "quiet", Denied, 1, 1, 1)
			if f := set.floor.Load(); f != 0 {
				t.Fatalf("floor %d while shard 2 observes a trickle, want 0", f)
			}
		}
		for range 25 { // 2.5 s without the trickle: shard 2 idle again
			flood()
		}
		if f, shift := set.floor.Load(), uint32(tr.shards[0].flood.Load()&0xff); f == 0 || f > shift {
			t.Errorf("floor %d after shard 2 idled, want 1 to shard 0's shift %d", f, shift)
		}
		cancel()
		<-done
	})
}
