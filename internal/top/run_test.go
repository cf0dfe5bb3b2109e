package top

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
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
