package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkRedisShapes measures what a check's shape costs Redis, with
// sluice's redisstore (default options) and 64 callers, side by
// side on one server:
//
//   - hits=1 and hits=4: a sliding-window check of one hit, and one of four
//     hits (four zones, one key) on the spread workload;
//   - hotlog: one key under a log limit at sluice.MaxLogRate per second,
//     the largest a log may have, beside a sliding-window limit on the same
//     key and rate: most checks in each second are denied, the first
//     MaxLogRate are recorded.
func BenchmarkRedisShapes(b *testing.B) {
	srv := redistest.Standalone(b)
	spread := spreadWorkload()
	keys := makeKeys(1)
	hot := workload{name: "hotlog", keys: keys, probes: cloneAll(keys), rate: sluice.MaxLogRate, window: time.Second}
	cases := []struct {
		name string
		w    workload
		a    sluice.Algorithm
		hits int
	}{
		{"spread/hits=1", spread, sluice.SlidingWindow, 1},
		{"spread/hits=4", spread, sluice.SlidingWindow, 4},
		{"hotlog/limiter=sluice-log", hot, sluice.Log, 1},
		{"hotlog/limiter=sluice-sliding-window", hot, sluice.SlidingWindow, 1},
	}
	for _, cs := range cases {
		var c *contender
		b.Run(cs.name, func(b *testing.B) {
			if c == nil {
				flush(b, srv)
				store, err := redisstore.Dial(srv.URL(), redisstore.Options{})
				if err != nil {
					b.Fatalf("redisstore: %v", err)
				}
				built := multiHitContender(cs.name, store, cs.w.limit(cs.a), cs.hits)
				built.close = func() { _ = store.Close() }
				warmConcurrently(b, &built, cs.w)
				c = &built
			}
			runCallers(b, *c, cs.w, func() float64 { return serverCPU(b, srv) })
		})
		if c != nil {
			c.close()
		}
	}
}

// multiHitContender checks n hits of cost 1 on l per call: zones z0..z{n-1},
// the caller's key.
func multiHitContender(name string, l sluice.Limiter, lim sluice.Limit, n int) contender {
	return contender{name: name, caller: func() decideFunc {
		hits := make([]sluice.Hit, n)
		for i := range hits {
			hits[i] = sluice.Hit{Zone: fmt.Sprint("z", i), Limit: lim}
		}
		var d sluice.Decision
		return func(ctx context.Context, key string) (bool, error) {
			for i := range hits {
				hits[i].Key = key
			}
			if err := l.Check(ctx, sluice.Check{Hits: hits, Cost: 1}, &d); err != nil {
				return false, fmt.Errorf("%s: %w", name, err)
			}
			return d.Allowed, nil
		}
	}}
}
