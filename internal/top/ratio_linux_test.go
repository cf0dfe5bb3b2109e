package top

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// threadCPU returns the CPU time the calling OS thread has used
// (CLOCK_THREAD_CPUTIME_ID): unlike wall time, it leaves out the time
// other processes of a shared machine take.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// BenchmarkLimiterRatio measures what tracking costs on the library path
// (a memory store) as a ratio that a busy machine disturbs little: 31
// rounds, each running 200,000 checks per goroutine (GOMAXPROCS
// goroutines, each locked to its thread) without tracking and with it
// (the defaults, the set's clock running), in alternating order, on warm
// stores. It reports, over the rounds, the median and the 10th and 90th
// percentiles of the ratio of checks per CPU-second with tracking to
// checks per CPU-second without (1.0: free; 0.95: 5% fewer decisions per
// second of CPU), the CPU ns per check of each, and the checks not
// observed because a tracker was busy. Run it once:
//
//	go test -run '^$' -bench BenchmarkLimiterRatio -benchtime 1x ./internal/top
func BenchmarkLimiterRatio(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(len(keys)-1))
	traces := map[string][]int{"uniform": make([]int, 1<<16), "zipf": make([]int, 1<<16)}
	for i := range traces["uniform"] {
		traces["uniform"][i] = rng.IntN(len(keys))
		traces["zipf"][i] = int(zipf.Uint64())
	}
	for _, tc := range []struct {
		trace     string
		denyEvery int
	}{{"zipf", 100}, {"zipf", 10}, {"uniform", 10}} {
		b.Run(tc.trace+"/deny-1-in-"+strconv.Itoa(tc.denyEvery), func(b *testing.B) {
			const perRound = 200_000
			off := newMemstore(b)
			set := newSetOpts(b, Options{}, map[string]bool{"api": false})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go set.Run(ctx)
			on := &Limiter{Next: newMemstore(b), Set: set}
			run := func(lim sluice.Limiter) time.Duration {
				var mu sync.Mutex
				var cpu time.Duration
				var wg sync.WaitGroup
				for w := range runtime.GOMAXPROCS(0) {
					wg.Go(func() {
						runtime.LockOSThread()
						defer runtime.UnlockOSThread()
						start := threadCPU()
						checkTrace(lim, keys, traces[tc.trace], tc.denyEvery, w*7919, perRound)
						used := threadCPU() - start
						mu.Lock()
						cpu += used
						mu.Unlock()
					})
				}
				wg.Wait()
				return cpu
			}
			run(off) // warm both stores
			run(on)
			var ratios, nsOff, nsOn []float64
			for b.Loop() {
				for r := range 31 {
					var cOff, cOn time.Duration
					if r%2 == 0 {
						cOff, cOn = run(off), run(on)
					} else {
						cOn, cOff = run(on), run(off)
					}
					ratios = append(ratios, float64(cOff)/float64(cOn))
					n := float64(perRound * runtime.GOMAXPROCS(0))
					nsOff, nsOn = append(nsOff, float64(cOff)/n), append(nsOn, float64(cOn)/n)
				}
			}
			for _, s := range [][]float64{ratios, nsOff, nsOn} {
				slices.Sort(s)
			}
			b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
			b.ReportMetric(ratios[len(ratios)/10], "p10-ratio")
			b.ReportMetric(ratios[len(ratios)*9/10], "p90-ratio")
			b.ReportMetric(nsOff[len(nsOff)/2], "cpu-ns/check-off")
			b.ReportMetric(nsOn[len(nsOn)/2], "cpu-ns/check-on")
			b.ReportMetric(float64(set.Tracker("api").Snapshot(1).Missed), "missed")
		})
	}
}
