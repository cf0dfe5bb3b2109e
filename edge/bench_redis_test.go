package edge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
)

// callers is the number of concurrent callers of the Redis benchmarks.
const callers = 64

// cpuTime returns the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runCallers runs b.N checks from callers goroutines, each picking its
// check with next, and reports decisions/s, this process's CPU per check
// (cpu-ns/op: Redis, a process of its own, is not counted) and the share
// of checks allowed.
func runCallers(b *testing.B, l sluice.Limiter, next func(r *rand.Rand) sluice.Check) {
	b.Helper()
	b.SetParallelism((callers + 1) / max(1, testingProcs()))
	b.ReportAllocs()
	cpu0, t0 := cpuTime(), time.Now()
	var allowed atomicInt
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		var d sluice.Decision
		n := int64(0)
		for pb.Next() {
			if err := l.Check(context.Background(), next(r), &d); err != nil {
				panic(err)
			}
			if d.Allowed {
				n++
			}
		}
		allowed.Add(n)
	})
	b.StopTimer()
	elapsed, cpu := time.Since(t0), cpuTime()-cpu0
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(100*float64(allowed.Load())/float64(b.N), "%allowed")
}

// BenchmarkHotKeys: 10 keys far over their limit, 64 callers, one Redis:
// the Redis store alone against the same store behind a deny cache. Run
// with -count for interleaved rounds.
func BenchmarkHotKeys(b *testing.B) {
	store := newRedisStore(b, redistest.Standalone(b).URL())
	checks := make([]sluice.Check, 10)
	for i := range checks {
		checks[i] = check(1, hit(fmt.Sprint("hot-", i), "10r/h", sluice.SlidingWindow))
		for range 11 {
			mustCheck(b, store, checks[i]) // over the limit
		}
	}
	next := func(r *rand.Rand) sluice.Check { return checks[r.IntN(len(checks))] }
	dc, err := edge.NewDenyCache(store, edge.DenyCacheOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("store", func(b *testing.B) { runCallers(b, store, next) })
	b.Run("store+denycache", func(b *testing.B) { runCallers(b, dc, next) })
}

// BenchmarkSpread: 100,000 keys under their limits, 64 callers, one Redis:
// the Redis store against the same store behind an Async limiter (default
// options). Every key is seen once by each contender before its first
// timed run. After each async run everything owed is flushed; the
// over-admission the limiter measured (cost the store refused because a
// key was full, and cost dropped) is reported as over/op, the store calls
// its flushes made as flushcalls/op.
func BenchmarkSpread(b *testing.B) {
	store := newRedisStore(b, redistest.Standalone(b).URL())
	checks := make([]sluice.Check, 100_000)
	for i := range checks {
		checks[i] = check(1, hit(fmt.Sprintf("user-%06d", i), "1000000r/h", sluice.SlidingWindow))
	}
	next := func(r *rand.Rand) sluice.Check { return checks[r.IntN(len(checks))] }
	a, err := edge.NewAsync(store, edge.AsyncOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close(context.Background())
	warm := map[sluice.Limiter]bool{}
	warmUp := func(b *testing.B, l sluice.Limiter) {
		if !warm[l] {
			for _, c := range checks {
				mustCheck(b, l, c)
			}
			warm[l] = true
		}
	}
	b.Run("store", func(b *testing.B) {
		warmUp(b, store)
		runCallers(b, store, next)
	})
	b.Run("async", func(b *testing.B) {
		warmUp(b, a)
		s0 := a.Stats()
		runCallers(b, a, next)
		if err := a.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		s := a.Stats()
		b.ReportMetric(float64(s.Unrecorded+s.Dropped-s0.Unrecorded-s0.Dropped)/float64(b.N), "over/op")
		b.ReportMetric(float64(s.FlushCalls-s0.FlushCalls)/float64(b.N), "flushcalls/op")
		b.ReportMetric(float64(s.Sync-s0.Sync)/float64(b.N), "sync/op")
	})
}

// BenchmarkDenyCacheHitCPU: only cache hits, 64 callers, on 10 keys; the
// CPU a hit costs (cpu-ns/op), beside a baseline whose limiter only writes
// a denial (the cost of the callers' loop and of writing the decision).
func BenchmarkDenyCacheHitCPU(b *testing.B) {
	dc := newDenyCache(b, newMemstore(b, nil), edge.DenyCacheOptions{})
	checks := make([]sluice.Check, 10)
	for i := range checks {
		checks[i] = check(1, hit(fmt.Sprint("hot-", i), "1r/h", sluice.SlidingWindow))
		mustCheck(b, dc, checks[i])
		mustCheck(b, dc, checks[i])
	}
	next := func(r *rand.Rand) sluice.Check { return checks[r.IntN(len(checks))] }
	b.Run("baseline", func(b *testing.B) { runCallers(b, denyAll{}, next) })
	b.Run("hit", func(b *testing.B) { runCallers(b, dc, next) })
}
