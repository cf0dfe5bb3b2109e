package edge_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

// TestAsyncResetWaitsOnTheFlush: a Reset of a key whose flush is under way
// waits for that flush, and returns the instant it ends: it waits on the
// flush's end, not on a poll. In a synctest bubble time is exact, so a
// Reset that polled every 100 µs would return 30 µs after the flush ended,
// its first poll past the end, and fail this test.
func TestAsyncResetWaitsOnTheFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const flushTimeout = time.Second
		f := newFlaky(t, nil)
		start := time.Now()
		a := newAsync(t, f, edge.AsyncOptions{FlushTimeout: flushTimeout})
		c := check(1, hit("k", "100r/h", sluice.Log))
		mustCheck(t, a, c)
		mustCheck(t, a, c)
		mustCheck(t, a, c) // asks the store: the key's view
		mustCheck(t, a, c) // local: 1 owed
		f.set(hang)
		// The first round, at SyncInterval, hangs until its call's timeout.
		flushEnd := start.Add(edge.DefaultSyncInterval + flushTimeout)
		time.Sleep(edge.DefaultSyncInterval + 30*time.Microsecond)
		f.set(answer) // the flush under way still hangs; the reset will not
		if err := a.Reset(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		if got := time.Now(); !got.Equal(flushEnd) {
			t.Errorf("Reset returned %v after the flush ended, want at the same instant", got.Sub(flushEnd))
		}
		if got := used(t, f.next, c); got != 0 {
			t.Errorf("usage after the reset: %v, want 0 (the flush's cost forgotten)", got)
		}
	})
}

// TestAsyncCloseWaitsOnTheChecks: Close waits for the checks under way,
// and goes on the instant the last one ends: it waits on a condition, not
// on a poll: a Close that polled every 100 µs would return 30 µs late here
// (its first poll past the check's end).
func TestAsyncCloseWaitsOnTheChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		start := time.Now()
		a, err := edge.NewAsync(f, edge.AsyncOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f.set(hang)
		checkEnd := start.Add(time.Second)
		done := make(chan error)
		go func() {
			ctx, cancel := context.WithDeadline(context.Background(), checkEnd)
			defer cancel()
			var d sluice.Decision
			done <- a.Check(ctx, check(1, hit("k", "100r/h", sluice.Log)), &d)
		}()
		time.Sleep(30 * time.Microsecond) // the check waits on the store
		closed := make(chan time.Time)
		go func() {
			if err := a.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
			closed <- time.Now()
		}()
		if err := <-done; err == nil {
			t.Errorf("the check on a hung store returned no error")
		}
		if got := <-closed; !got.Equal(checkEnd) {
			t.Errorf("Close returned %v after the last check ended, want at the same instant", got.Sub(checkEnd))
		}
	})
}
