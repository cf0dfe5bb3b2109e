package edge_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
)

// BenchmarkFreshKeys: 100,000 keys under their limits, new to the store in
// every run (a prefix per run), 64 callers, one Redis: the Redis store
// alone, and behind an Async limiter (default options) whose flushes of
// the keys seen again share the store with the first checks of the
// others. errors counts the checks that failed: the goal is 0 for both,
// in every round (bench/edge.sh 10 3s FreshKeys).
func BenchmarkFreshKeys(b *testing.B) {
	srv := redistest.Standalone(b)
	store := newBenchStore(b, srv)
	a := newBenchAsync(b, store, edge.AsyncOptions{})
	var runs atomic.Int64
	for _, c := range []struct {
		name string
		l    sluice.Limiter
	}{{"store", store}, {"async", a}} {
		b.Run(c.name, func(b *testing.B) {
			run := runs.Add(1)
			checks := make([]sluice.Check, 100_000)
			for i := range checks {
				checks[i] = check(1, hit(fmt.Sprintf("fresh-%d-%06d", run, i), "1000000r/h", sluice.SlidingWindow))
			}
			runCallers(b, c.l, srv, func(r *rand.Rand) sluice.Check { return checks[r.IntN(len(checks))] })
		})
	}
}
