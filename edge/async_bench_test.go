package edge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

// BenchmarkAsyncLocal: the cost of a decision from the local view, 64
// callers over 1,000 keys far under their limits, behind a memory store.
func BenchmarkAsyncLocal(b *testing.B) {
	m := newMemstore(b, nil)
	a := newAsync(b, m, edge.AsyncOptions{})
	checks := make([]sluice.Check, 1000)
	for i := range checks {
		checks[i] = check(1, hit(fmt.Sprintf("user-%06d", i), "1000000000r/h", sluice.SlidingWindow))
		mustCheck(b, a, checks[i])
	}
	runCallers(b, a, nil, func(r *rand.Rand) sluice.Check { return checks[r.IntN(len(checks))] })
}

// BenchmarkAsyncFirstSightLocal: the cost of a first-sight admission, 64
// callers each admitting keys never seen (a counter), behind a memory
// store; the records wait for a round that does not come during the run
// (a sync interval of an hour), so only the admission is measured.
func BenchmarkAsyncFirstSightLocal(b *testing.B) {
	m := newMemstore(b, nil)
	keys := max(b.N, 1000)
	a, err := edge.NewAsync(m, edge.AsyncOptions{FirstSight: 1, SyncInterval: time.Hour, MaxKeys: keys, MaxBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		// What it owes is not the subject: dropped at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		a.Close(ctx)
	})
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("user-%08d", i)
	}
	var next atomic.Int64
	runCallers(b, a, nil, func(*rand.Rand) sluice.Check {
		return check(1, hit(names[int(next.Add(1)-1)%keys], "10r/d", sluice.SlidingWindow))
	})
	// Keys whose set of the table was full went to the store.
	b.ReportMetric(float64(a.Stats().Sync)/float64(b.N), "sync/op")
}
