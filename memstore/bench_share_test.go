package memstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// BenchmarkSharing finds where a parallel spread check spends its extra
// CPU time: two goroutines check sliding-window keys of one store, and
// what they share varies.
//
//   - share=serial: one goroutine walks every key, for reference;
//   - share=all: both walk every key (as bench/'s spread workload), so
//     both write every entry and every shard's lock;
//   - share=shards: each walks its own half of the keys, chosen by key,
//     so entries are private but both lock every shard;
//   - share=none: each walks the keys of its own half of the shards, so
//     neither entries nor shard locks are written by both.
//
// cpu-ns/op is the process's CPU time per check; the difference between
// shards and none is what writing shard locks from both cores costs,
// between all and shards what sharing entries costs.
//
//	go test -run '^$' -bench BenchmarkSharing -cpu 2 ./memstore
func BenchmarkSharing(b *testing.B) {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%08d", i)
	}
	l := sluice.Limit{Rate: 10_000, Window: time.Hour}
	s := warmStore(b, keys, l)
	parts := map[string]func(k string, i int) int{
		"all":    func(string, int) int { return -1 },
		"shards": func(_ string, i int) int { return i % 2 },
		"none":   func(k string, _ int) int { return int(s.keyHash("", "api", k) & s.mask % 2) },
	}
	b.Run("share=serial", func(b *testing.B) {
		hits := []sluice.Hit{{Zone: "api", Limit: l}}
		var d sluice.Decision
		cpu, n := processCPU(), 0
		for i := 0; b.Loop(); i++ {
			hits[0].Key = keys[i%len(keys)]
			if err := s.Check(context.Background(), sluice.Check{Hits: hits, Cost: 1}, &d); err != nil {
				b.Fatal(err)
			}
			n++
		}
		b.ReportMetric(float64(processCPU()-cpu)/float64(n), "cpu-ns/op")
	})
	for _, share := range []string{"all", "shards", "none"} {
		var own [2][]string
		for i, k := range keys {
			if p := parts[share](k, i); p < 0 {
				own[0], own[1] = append(own[0], k), append(own[1], k)
			} else {
				own[p] = append(own[p], k)
			}
		}
		b.Run("share="+share, func(b *testing.B) {
			var worker, total atomic.Int64
			cpu := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := int(worker.Add(1) - 1)
				mine := own[w%2]
				hits := []sluice.Hit{{Zone: "api", Limit: l}}
				var d sluice.Decision
				ctx := context.Background()
				n := 0
				for i := w * len(mine) / 2; pb.Next(); i++ {
					hits[0].Key = mine[i%len(mine)]
					if err := s.Check(ctx, sluice.Check{Hits: hits, Cost: 1}, &d); err != nil {
						b.Error(err)
						return
					}
					n++
				}
				total.Add(int64(n))
			})
			b.ReportMetric(float64(processCPU()-cpu)/float64(total.Load()), "cpu-ns/op")
		})
	}
}

// processCPU is the process's CPU time so far, user and system, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
