package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// benchKeys is the number of distinct keys the benchmarks spread checks
// over.
const benchKeys = 100_000

// BenchmarkCheck measures one unit-cost check per operation on a store
// holding benchKeys keys (all created before the timer starts, so the
// figures are the steady state; then visited in another order, so that
// memory locality from the warm-up does not flatter the store), for every
// algorithm, from one goroutine and from GOMAXPROCS goroutines. The clock
// is the real one. Limits are high enough that checks are allowed and
// recorded.
//
//	go test -run '^$' -bench BenchmarkCheck -benchtime 1s ./memstore
func BenchmarkCheck(b *testing.B) {
	keys := benchKeySet()
	for _, a := range sluice.Algorithms() {
		l := sluice.Limit{Rate: 1000, Window: time.Minute, Algorithm: a}
		b.Run(string(a)+"/serial", func(b *testing.B) {
			s := warmStore(b, keys, l)
			var d sluice.Decision
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				c := sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: keys[i%benchKeys], Limit: l}}, Cost: 1}
				if err := s.Check(ctx, c, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(a)+"/parallel", func(b *testing.B) {
			s := warmStore(b, keys, l)
			var worker atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var d sluice.Decision
				ctx := context.Background()
				i := int(worker.Add(1)) * 7919 // each goroutine walks its own part of the keys
				for ; pb.Next(); i++ {
					c := sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: keys[i%benchKeys], Limit: l}}, Cost: 1}
					if err := s.Check(ctx, c, &d); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkCheckTwoLimits measures a check of two sliding-window limits on
// one key ("10r/s, 1000r/h"), both decided atomically.
func BenchmarkCheckTwoLimits(b *testing.B) {
	keys := benchKeySet()
	limits, err := sluice.ParseLimits("10r/s, 1000r/h")
	if err != nil {
		b.Fatal(err)
	}
	s := warmStore(b, keys, limits...)
	var worker atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var d sluice.Decision
		hits := make([]sluice.Hit, 2)
		i := int(worker.Add(1)) * 7919
		for ; pb.Next(); i++ {
			for j := range hits {
				hits[j] = sluice.Hit{Zone: "api", Key: keys[i%benchKeys], Limit: limits[j]}
			}
			if err := s.Check(context.Background(), sluice.Check{Hits: hits, Cost: 1}, &d); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// benchKeySet returns benchKeys distinct client IDs.
func benchKeySet() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("client-%06d", i)
	}
	return keys
}

// warmStore returns a store holding one state per key and limit, and
// shuffles keys (with a fixed seed) for the timed loop.
func warmStore(b *testing.B, keys []string, limits ...sluice.Limit) *Store {
	b.Helper()
	defer rand.New(rand.NewPCG(1, 2)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	var d sluice.Decision
	for _, k := range keys {
		c := sluice.Check{Cost: 1}
		for _, l := range limits {
			c.Hits = append(c.Hits, sluice.Hit{Zone: "api", Key: k, Limit: l})
		}
		if err := s.Check(context.Background(), c, &d); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkCheckHot measures the deny path: 10 keys far over a limit of
// 100 per minute (the bench module's hot workload), every algorithm, from
// one goroutine and from GOMAXPROCS goroutines walking the same keys one
// apart. Peek decides the sliding-window, GCRA and decay checks without
// a lock; the log's and the buckets' take the state's own lock.
//
//	go test -run '^$' -bench BenchmarkCheckHot -benchtime 1s ./memstore
func BenchmarkCheckHot(b *testing.B) {
	keys := benchKeySet()[:10]
	for _, a := range sluice.Algorithms() {
		l := sluice.Limit{Rate: 100, Window: time.Minute, Algorithm: a}
		s := newStore(b, Options{})
		var d sluice.Decision
		for _, k := range keys {
			for range 101 {
				if err := s.Check(context.Background(), sluice.Check{Hits: []sluice.Hit{{Key: k, Limit: l}}, Cost: 1}, &d); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(string(a)+"/serial", func(b *testing.B) {
			var d sluice.Decision
			ctx := context.Background()
			hits := []sluice.Hit{{Limit: l}}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				hits[0].Key = keys[i%len(keys)]
				if err := s.Check(ctx, sluice.Check{Hits: hits, Cost: 1}, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(a)+"/parallel", func(b *testing.B) {
			var worker atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var d sluice.Decision
				ctx := context.Background()
				hits := []sluice.Hit{{Limit: l}}
				for i := int(worker.Add(1)); pb.Next(); i++ {
					hits[0].Key = keys[i%len(keys)]
					if err := s.Check(ctx, sluice.Check{Hits: hits, Cost: 1}, &d); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
