package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// callers is the number of concurrent callers of the benchmarks.
const callers = 64

// BenchmarkCheck compares one script call per check (MaxBatch 1) with
// coalesced batch calls (the default), with 64 concurrent callers on one
// local redis-server, on two workloads: spread (100,000 keys, limits never
// reached) and hot (10 keys far over their limit). It reports checks/s and
// the p50 and p99 latency of a check.
//
//	go test ./redisstore -run '^$' -bench BenchmarkCheck -benchtime 3s -count 3
func BenchmarkCheck(b *testing.B) {
	srv := redistest.Standalone(b)
	workloads := []struct {
		name string
		keys int
		rate int64
	}{
		{"spread", 100_000, sluice.MaxRate},
		{"hot", 10, 10},
	}
	for _, w := range workloads {
		for _, a := range []sluice.Algorithm{sluice.SlidingWindow, sluice.GCRA, sluice.Log} {
			if a == sluice.Log && w.rate > sluice.MaxLogRate {
				continue
			}
			for _, batch := range []int{1, redisstore.DefaultMaxBatch} {
				mode := "per-check"
				if batch > 1 {
					mode = "coalesced"
				}
				b.Run(fmt.Sprintf("%s/%s/%s", w.name, a, mode), func(b *testing.B) {
					s, err := redisstore.New(srv.Client(), redisstore.Options{MaxBatch: batch, Timeout: 3 * time.Second})
					if err != nil {
						b.Fatal(err)
					}
					l := sluice.Limit{Rate: w.rate, Window: time.Minute, Algorithm: a}
					before := scriptStats(b, srv)
					runParallel(b, s, l, w.keys)
					after := scriptStats(b, srv)
					calls, usec := after.calls-before.calls, after.usec-before.usec
					if calls > 0 {
						b.ReportMetric(float64(b.N)/float64(calls), "checks/call")
						b.ReportMetric(float64(usec)/float64(b.N), "redis-µs/check")
					}
				})
			}
		}
	}
}

// stats are the script calls Redis has run and the µs it spent in them.
type stats struct{ calls, usec int64 }

// scriptStats reads EVAL and EVALSHA's counters from INFO commandstats.
func scriptStats(b *testing.B, srv *redistest.Server) stats {
	text, err := srv.Do("INFO", "commandstats").ToString()
	if err != nil {
		b.Fatal(err)
	}
	var st stats
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_eval")
		if !ok {
			continue
		}
		_, fields, _ := strings.Cut(rest, ":")
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.calls += n
			case "usec":
				st.usec += n
			}
		}
	}
	return st
}

// runParallel runs b.N checks from 64 goroutines on keys random keys and
// reports throughput and latency percentiles.
func runParallel(b *testing.B, s *redisstore.Store, l sluice.Limit, keys int) {
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprint("user-", i)
	}
	var mu sync.Mutex
	var lat []time.Duration
	var seed atomic.Uint64
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		x := seed.Add(0x9E3779B97F4A7C15)
		var d sluice.Decision
		var mine []time.Duration
		c := sluice.Check{Cost: 1, Hits: []sluice.Hit{{Zone: "bench", Limit: l}}}
		for pb.Next() {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			c.Hits[0].Key = names[x%uint64(keys)]
			t0 := time.Now()
			if err := s.Check(context.Background(), c, &d); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "checks/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}
