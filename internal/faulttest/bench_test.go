package faulttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkDeniedCheck compares, side by side against one local Redis, a
// check that is denied by the store and the same check denied by the deny
// cache in front of it: what the cache saves a client that keeps hammering.
func BenchmarkDeniedCheck(b *testing.B) {
	srv := redistest.Standalone(b)
	store, err := redisstore.Dial(srv.URL(), redisstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	dc, err := edge.NewDenyCache(store, edge.DenyCacheOptions{})
	if err != nil {
		b.Fatal(err)
	}
	c := sluice.Check{Hits: []sluice.Hit{hit("hammer", "1r/h", sluice.SlidingWindow)}, Cost: 1}
	var d sluice.Decision
	for range 2 { // the first is allowed, the second denied and cached
		if err := dc.Check(context.Background(), c, &d); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name string
		l    sluice.Limiter
		want sluice.Source
	}{{"redis", store, sluice.FromStore}, {"deny-cache", dc, sluice.FromDenyCache}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32) // 64 callers on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				var d sluice.Decision
				for pb.Next() {
					if err := bc.l.Check(context.Background(), c, &d); err != nil || d.Allowed || d.Source != bc.want {
						panic(fmt.Sprint(err, d.Allowed, d.Source))
					}
				}
			})
		})
	}
}

// BenchmarkGuardOnRedis compares, side by side against one local Redis with
// 64 callers, allowed checks made on the store directly and through a
// healthy Guard: the cost of the timeout and the breaker on the hot path.
func BenchmarkGuardOnRedis(b *testing.B) {
	srv := redistest.Standalone(b)
	store, err := redisstore.Dial(srv.URL(), redisstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	g, err := edge.NewGuard(store, edge.GuardOptions{Timeout: time.Second}) // the machine may be busy
	if err != nil {
		b.Fatal(err)
	}
	c := sluice.Check{Hits: []sluice.Hit{hit("hot", "1000000000r/s", sluice.SlidingWindow)}, Cost: 1}
	for _, bc := range []struct {
		name string
		l    sluice.Limiter
	}{{"store", store}, {"guard", g}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				var d sluice.Decision
				for pb.Next() {
					if err := bc.l.Check(context.Background(), c, &d); err != nil || !d.Allowed || d.Source != sluice.FromStore {
						panic(fmt.Sprint(err, d.Allowed, d.Source))
					}
				}
			})
		})
	}
}
