package edge_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

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
