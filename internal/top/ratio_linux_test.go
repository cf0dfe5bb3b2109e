package top

import (
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/benchcpu"
)

// BenchmarkLimiterRatio measures what tracking costs on the library path
// (a memory store) as a ratio that a busy machine disturbs little: 61
// rounds, each running 200,000 checks per goroutine (GOMAXPROCS
// goroutines, each locked to its thread) without tracking and with it
// (the defaults, the set's clock running), in alternating order, on one
// warm store (the same for both). It reports, over the rounds, the median and the 10th and 90th
// percentiles of the ratio of checks per CPU-second with tracking to
// checks per CPU-second without (1.0: free; 0.95: 5% fewer decisions per
// second of CPU), the CPU ns per check of each, the checks not observed
// because a tracker was busy, and the share of checks observed (under
// Options.Budget: the rest were sampled out or were common checks not
// drawn). Run it once:
//
//	go test -run '^$' -bench BenchmarkLimiterRatio -benchtime 1x ./internal/top
func BenchmarkLimiterRatio(b *testing.B) {
	keys, traces := benchTraces(7, 8)
	for _, tc := range benchCases {
		b.Run(tc.name(), func(b *testing.B) {
			const perRound, rounds = 200_000, 61
			// One store for both: two stores hash keys with different
			// seeds, which alone moves a check's cost by a few percent.
			off := newMemstore(b)
			set := newSetOpts(b, Options{}, map[string]bool{"api": false})
			runClock(b, set)
			on := &Limiter{Next: off, Set: set}
			run := func(lim sluice.Limiter) func() time.Duration {
				return func() time.Duration {
					return benchcpu.Parallel(func(w int) {
						checkTrace(lim, keys, traces[tc.trace], tc.denyEvery, w*7919, perRound)
					})
				}
			}
			var r benchcpu.Ratio
			for b.Loop() {
				r = benchcpu.Interleave(rounds, run(off), run(on))
			}
			r.Report(b, "check", perRound*runtime.GOMAXPROCS(0))
			tr := set.Tracker("api")
			b.ReportMetric(float64(tr.Snapshot(1).Missed), "missed")
			b.ReportMetric(float64(tr.observations())/float64(rounds*perRound*runtime.GOMAXPROCS(0)), "observed/check")
		})
	}
}
