package bench

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// spreadKeys is the number of keys of the spread workload; hotKeys the
// number of the hot one.
const (
	spreadKeys = 100_000
	hotKeys    = 10
)

// A decideFunc answers one unit check on key: allowed or denied, or an
// error when the limiter could not decide.
type decideFunc func(ctx context.Context, key string) (allowed bool, err error)

// A contender is one limiter under test. Each goroutine of a benchmark calls
// caller once and keeps the decideFunc to itself, so a contender can keep
// per-caller scratch space (sluice reuses its Decision) without locks.
type contender struct {
	name   string
	caller func() decideFunc
	close  func()
	// warmErrors counts the warm-up checks that returned an error (Redis
	// benchmarks): reported with every run as warmup-errors.
	warmErrors int64
}

// A contenderSpec names a contender and builds it for a workload; nothing
// is started until build is called.
type contenderSpec struct {
	name  string
	build func(b *testing.B, w workload) contender
}

// A workload is a set of keys and the limit every contender applies to
// them, expressed as "rate per window".
type workload struct {
	name string
	// keys are the keys the warm-up checks: a limiter that stores the
	// caller's string keeps these.
	keys []string
	// probes are the same keys in other memory, used by the timed loops.
	// A request's key is a fresh string, never the one a map stored, so
	// comparing it costs a real byte comparison; with the same string,
	// Go's string equality returns at the pointer check and a limiter that
	// keeps the caller's strings would look faster than it is.
	probes []string
	rate   int64
	window time.Duration
	// allAllowed says every check must be allowed: the benchmark fails
	// otherwise, so a contender cannot look fast by taking the deny path.
	allAllowed bool
	// exhaust says the warm-up spends each key's whole limit, so the timed
	// loop measures the deny path.
	exhaust bool
}

// limit returns w's limit as a sluice.Limit with algorithm a.
func (w workload) limit(a sluice.Algorithm) sluice.Limit {
	return sluice.Limit{Rate: w.rate, Window: w.window, Algorithm: a}
}

// spreadWorkload is 100,000 keys under a limit no benchmark run can reach:
// the allow path, one key after another in a shuffled order.
func spreadWorkload() workload {
	n := spreadKeys
	if smoke() {
		n = smokeKeys
	}
	keys := makeKeys(n)
	return workload{name: "spread", keys: keys, probes: cloneAll(keys), rate: 10_000, window: time.Hour, allAllowed: true}
}

// hotWorkload is 10 keys far over a limit of 100 per minute: after the
// first 100 checks per key, the deny path.
func hotWorkload() workload {
	keys := makeKeys(hotKeys)
	return workload{name: "hot", keys: keys, probes: cloneAll(keys), rate: 100, window: time.Minute, exhaust: true}
}

// smokeKeys is the number of keys of the spread workload in a smoke run.
const smokeKeys = 1_000

// smoke reports whether the benchmarks run as a smoke test, with
// -benchtime 1x as scripts/test does: each benchmark runs once and
// measures nothing, so the spread workload shrinks to smokeKeys keys rather
// than warming 100,000 keys per contender (seconds per Redis contender).
func smoke() bool {
	f := flag.Lookup("test.benchtime")
	return f != nil && f.Value.String() == "1x"
}

// makeKeys returns n distinct keys shaped like user IDs, in a fixed shuffled
// order so that consecutive checks land on unrelated map slots.
func makeKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%08d", i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(n, func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

// cloneAll returns a copy of keys whose strings share no memory with them.
func cloneAll(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = strings.Clone(k)
	}
	return out
}

// warm checks every key of w once, or until its limit is spent when
// w.exhaust is set, so the timed loop measures the steady state of a
// limiter that already tracks its keys, not map growth.
func warm(b *testing.B, c contender, w workload) {
	b.Helper()
	decide := c.caller()
	ctx := context.Background()
	for _, k := range w.keys {
		for range 1 + w.rate {
			ok, err := decide(ctx, k)
			if err != nil {
				b.Fatalf("%s: warm-up check on %q: %v", c.name, k, err)
			}
			if !w.exhaust || !ok {
				break
			}
		}
	}
}

// runSerial checks the keys of w one after another from one goroutine.
func runSerial(b *testing.B, c contender, w workload) {
	decide := c.caller()
	ctx := context.Background()
	denied := 0
	b.ReportAllocs()
	i := 0
	cpu := cpuTime()
	for b.Loop() {
		ok, err := decide(ctx, w.probes[i%len(w.probes)])
		if err != nil {
			b.Fatalf("%s: check: %v", c.name, err)
		}
		if !ok {
			denied++
		}
		i++
	}
	reportCPU(b, cpuTime()-cpu, i)
	report(b, c, w, denied, i)
}

// runParallel checks the keys of w from GOMAXPROCS goroutines
// (b.RunParallel), each starting at its own offset in the key list.
func runParallel(b *testing.B, c contender, w workload) {
	var next, denied, total atomic.Int64
	stride := max(1, len(w.keys)/64)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		decide := c.caller()
		ctx := context.Background()
		i := int(next.Add(1)) * stride
		n, d := 0, 0
		for pb.Next() {
			ok, err := decide(ctx, w.probes[i%len(w.probes)])
			if err != nil {
				b.Errorf("%s: check: %v", c.name, err)
				return
			}
			if !ok {
				d++
			}
			i++
			n++
		}
		denied.Add(int64(d))
		total.Add(int64(n))
	})
	reportCPU(b, cpuTime()-cpu, int(total.Load()))
	report(b, c, w, int(denied.Load()), int(total.Load()))
}

// report fails the benchmark when a workload that must be allowed was not,
// and reports the fraction of checks denied.
func report(b *testing.B, c contender, w workload, denied, total int) {
	b.Helper()
	if w.allAllowed && denied > 0 {
		b.Fatalf("%s: %d of %d checks denied on workload %s, whose limit is never reached", c.name, denied, total, w.name)
	}
	if total > 0 {
		b.ReportMetric(float64(denied)/float64(total), "denied/op")
	}
}

// cpuTime returns the CPU time the process has used so far, user and
// system, all threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per operation (cpu-ns/op): on a
// shared machine, time during which other processes held the CPU is not
// counted, so the figure is steadier than ns/op. A parallel run counts the
// CPU time of every goroutine. GC and any background work of the limiter
// are included.
func reportCPU(b *testing.B, cpu time.Duration, ops int) {
	if ops > 0 && cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(ops), "cpu-ns/op")
	}
}

// latencies collects per-check durations from many goroutines: each
// goroutine appends to its own slice and merges it once at the end.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) merge(own []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, own...)
	l.mu.Unlock()
}

// quantile returns the q-quantile (0 < q < 1) of the collected durations,
// or zero when there are none. It sorts the collection.
func (l *latencies) quantile(q float64) time.Duration {
	if len(l.all) == 0 {
		return 0
	}
	slices.Sort(l.all)
	return l.all[min(len(l.all)-1, int(q*float64(len(l.all))))]
}
