package edge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

// BenchmarkGuard compares, side by side, a memstore check called directly,
// the same check through a healthy Guard (the cost of the timeout context
// and the breaker), and a check decided while the breaker is open.
func BenchmarkGuard(b *testing.B) {
	c := check(1, hit("k", "1000000r/s", sluice.SlidingWindow))
	m := newMemstore(b, nil)
	healthy, err := edge.NewGuard(m, edge.GuardOptions{Timeout: time.Second}) // the machine may be busy
	if err != nil {
		b.Fatal(err)
	}
	f := &flaky{next: m}
	f.set(refuse)
	down, err := edge.NewGuard(f, edge.GuardOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for range edge.DefaultFailures {
		mustCheck(b, down, c)
	}
	for _, bc := range []struct {
		name string
		l    sluice.Limiter
		want sluice.Source
	}{{"memstore", m, sluice.FromStore}, {"guard", healthy, sluice.FromStore}, {"breaker-open", down, sluice.FromFailOpen}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var d sluice.Decision
				for pb.Next() {
					if err := bc.l.Check(context.Background(), c, &d); err != nil || d.Source != bc.want {
						panic(fmt.Sprint(err, d.Source))
					}
				}
			})
		})
	}
}
