package top

import (
	"context"
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

// BenchmarkForward measures what passing a check on costs a wrapper
// such as Limiter, apart from the store and from tracking: a check that
// does next to nothing (nopLimiter), called directly, through a wrapper
// that passes its Check argument on as it is (the compiler copies it in
// 16-byte moves, which wait for the caller's 8-byte stores to reach the
// cache), and through one that passes a literal of its fields (written
// word by word: Limiter's way). One thread, 300 rounds of 5,000 checks of
// each in turn over the Zipf trace; it reports the least CPU ns per
// check of each over the rounds, which a busy machine disturbs least:
//
//	go test -run '^$' -bench BenchmarkForward -benchtime 1x ./internal/top
func BenchmarkForward(b *testing.B) {
	keys, traces := benchTraces(7, 8)
	var next sluice.Limiter = &nopLimiter{}
	names := []string{"direct", "copy", "literal"}
	lims := []sluice.Limiter{next, &copyWrapper{next}, &literalWrapper{next}}
	const rounds, per = 300, 5000
	best := make([]time.Duration, len(lims))
	for b.Loop() {
		runtime.LockOSThread()
		for i := range best {
			best[i] = time.Hour
		}
		for r := range rounds {
			for i, l := range lims {
				start := benchcpu.ThreadCPU()
				checkTrace(l, keys, traces["zipf"], 100, r*per, per)
				best[i] = min(best[i], benchcpu.ThreadCPU()-start)
			}
		}
		runtime.UnlockOSThread()
	}
	for i, n := range names {
		b.ReportMetric(float64(best[i])/per, "cpu-ns/check-"+n)
	}
}

// nopLimiter allows a check of one hit with a cost, and does nothing else.
type nopLimiter struct{}

//go:noinline
func (*nopLimiter) Check(_ context.Context, c sluice.Check, d *sluice.Decision) error {
	d.Allowed = c.Cost > 0 && len(c.Hits) == 1
	return nil
}

func (*nopLimiter) Reset(context.Context, sluice.Check) error { return nil }

// copyWrapper passes its check on as it is.
type copyWrapper struct{ next sluice.Limiter }

func (w *copyWrapper) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	return w.next.Check(ctx, c, d)
}

func (w *copyWrapper) Reset(ctx context.Context, c sluice.Check) error { return w.next.Reset(ctx, c) }

// literalWrapper passes its check on as Limiter does.
type literalWrapper struct{ next sluice.Limiter }

func (w *literalWrapper) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if c.Group == "" && !c.Shadow {
		return w.next.Check(ctx, sluice.Check{Hits: c.Hits, Cost: c.Cost}, d)
	}
	return w.next.Check(ctx, c, d)
}

func (w *literalWrapper) Reset(ctx context.Context, c sluice.Check) error {
	return w.next.Reset(ctx, c)
}
