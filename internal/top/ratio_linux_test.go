package top

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/benchcpu"
)

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
			runClock(b, set)
			on := &Limiter{Next: newMemstore(b), Set: set}
			run := func(lim sluice.Limiter) func() time.Duration {
				return func() time.Duration {
					return benchcpu.Parallel(func(w int) {
						checkTrace(lim, keys, traces[tc.trace], tc.denyEvery, w*7919, perRound)
					})
				}
			}
			var r benchcpu.Ratio
			for b.Loop() {
				r = benchcpu.Interleave(31, run(off), run(on))
			}
			r.Report(b, "check", perRound*runtime.GOMAXPROCS(0))
			b.ReportMetric(float64(set.Tracker("api").Snapshot(1).Missed), "missed")
		})
	}
}
