package edge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
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

// redisCPU returns the CPU time, user plus system, srv has used since it
// started (INFO cpu).
func redisCPU(b *testing.B, srv *redistest.Server) time.Duration {
	b.Helper()
	text, err := srv.Do("INFO", "cpu").ToString()
	if err != nil {
		b.Fatalf("INFO cpu: %v", err)
	}
	total := 0.0
	for line := range strings.SplitSeq(text, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %s: %v", line, err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// A benchRun is what runCallers measured.
type benchRun struct {
	elapsed          time.Duration
	allowed, errored int64
}

// runCallers runs b.N checks from callers goroutines, each picking its
// check with next, and reports decisions/s, this process's CPU per check
// (cpu-ns/op), Redis's (redis-cpu-ns/op, when srv is not nil), the share
// of checks allowed and the checks that failed (errors: a limiter in front
// of a store must not add any).
func runCallers(b *testing.B, l sluice.Limiter, srv *redistest.Server, next func(r *rand.Rand) sluice.Check) benchRun {
	b.Helper()
	b.SetParallelism((callers + 1) / max(1, testingProcs()))
	b.ReportAllocs()
	var rcpu0 time.Duration
	if srv != nil {
		rcpu0 = redisCPU(b, srv)
	}
	cpu0, t0 := cpuTime(), time.Now()
	var allowed, errored atomic.Int64
	var firstErr atomic.Value
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		var d sluice.Decision
		var n, e int64
		for pb.Next() {
			if err := l.Check(context.Background(), next(r), &d); err != nil {
				e++
				firstErr.CompareAndSwap(nil, err.Error())
			} else if d.Allowed {
				n++
			}
		}
		allowed.Add(n)
		errored.Add(e)
	})
	b.StopTimer()
	run := benchRun{elapsed: time.Since(t0), allowed: allowed.Load(), errored: errored.Load()}
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(b.N)/run.elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	if srv != nil {
		b.ReportMetric(float64((redisCPU(b, srv)-rcpu0).Nanoseconds())/float64(b.N), "redis-cpu-ns/op")
	}
	b.ReportMetric(100*float64(run.allowed)/float64(b.N), "%allowed")
	b.ReportMetric(float64(run.errored), "errors")
	if run.errored > 0 {
		b.Logf("%d of %d checks failed, the first: %v", run.errored, b.N, firstErr.Load())
	}
	return run
}

// newBenchStore dials srv with the Redis store's default options (its
// 50 ms timeout included), as a user would.
func newBenchStore(b *testing.B, srv *redistest.Server) *redisstore.Store {
	b.Helper()
	s, err := redisstore.Dial(srv.URL(), redisstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func newBenchAsync(b *testing.B, next sluice.Limiter, opts edge.AsyncOptions) *edge.Async {
	b.Helper()
	a, err := edge.NewAsync(next, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(context.Background()) })
	return a
}

// BenchmarkHotKeys: 10 keys of 100r/s (sliding window), offered far more
// by 64 callers on one Redis: the store alone, behind a deny cache, and
// behind an Async limiter. Each run uses fresh keys. xlimit is what was
// admitted over limit × time (10 × 100/s × the run's length): the deny
// cache and async must admit what the store admits (no false denials),
// with 0 errors. Run with -count for interleaved rounds.
func BenchmarkHotKeys(b *testing.B) {
	srv := redistest.Standalone(b)
	store := newBenchStore(b, srv)
	dc, err := edge.NewDenyCache(store, edge.DenyCacheOptions{})
	if err != nil {
		b.Fatal(err)
	}
	a := newBenchAsync(b, store, edge.AsyncOptions{})
	var runs atomic.Int64
	for _, c := range []struct {
		name string
		l    sluice.Limiter
	}{{"store", store}, {"denycache", dc}, {"async", a}} {
		b.Run(c.name, func(b *testing.B) {
			checks := make([]sluice.Check, 10)
			for i := range checks {
				checks[i] = check(1, hit(fmt.Sprintf("hot-%d-%d", runs.Add(1), i), "100r/s", sluice.SlidingWindow))
			}
			run := runCallers(b, c.l, srv, func(r *rand.Rand) sluice.Check { return checks[r.IntN(len(checks))] })
			b.ReportMetric(float64(run.allowed)/(10*100*run.elapsed.Seconds()), "xlimit")
		})
	}
}

// BenchmarkHotKeysAdmission: the store alone, a deny cache and an Async
// limiter side by side at the same time, each with its own 10 keys of
// 100r/s (sliding window, fresh per run) offered far more by a third of
// 64 callers, on one Redis. Running together, they see the same load over
// the same time, so what each admitted compares directly: xstore is what
// the layer admitted over what the store alone admitted (no false
// denials: >= 0.97); errors are each one's failed checks.
//
// The store alone is no exact count under this load: its callers wait on
// Redis, then for a CPU that the other layers' callers keep busy, and
// checking a key less often than it frees units, they admit less than
// the limit allows (xstore above 1 when async's callers were not so
// starved). maxest is the exact check instead: each layer's admissions,
// timed as they return, replayed through the sliding window's estimate
// (its two counters, on this machine's clock, which is Redis's): the
// most it reached just after an admission, the limit (100) for an exact
// layer, a little more from the time between a decision and its return.
//
// Only the decisions made before the first caller runs out of work count:
// the callers take their checks from b.N in batches sized by the fastest
// ones, so a caller of the store alone (a round trip per check) still had
// hundreds to make after the others had finished, for up to 200 ms more
// of admissions (tail-ms: from the first caller's end to the last's).
func BenchmarkHotKeysAdmission(b *testing.B) {
	srv := redistest.Standalone(b)
	store := newBenchStore(b, srv)
	dc, err := edge.NewDenyCache(store, edge.DenyCacheOptions{})
	if err != nil {
		b.Fatal(err)
	}
	a := newBenchAsync(b, store, edge.AsyncOptions{})
	limiters := []sluice.Limiter{store, dc, a}
	var runs atomic.Int64
	b.SetParallelism((callers + 1) / max(1, testingProcs()))
	run := runs.Add(1)
	checks := make([][]sluice.Check, len(limiters))
	for l := range checks {
		for i := range 10 {
			checks[l] = append(checks[l], check(1, hit(fmt.Sprintf("hot-%d-%d-%d", run, l, i), "100r/s", sluice.SlidingWindow)))
		}
	}
	var next atomic.Int64
	var allowed, errored, late [3]atomic.Int64
	var mu sync.Mutex
	var admittedAt [3][10][]int64 // µs
	var stopped atomic.Bool
	var stop time.Time
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		l := int(next.Add(1)-1) % len(limiters)
		r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		var d sluice.Decision
		for pb.Next() {
			k := r.IntN(10)
			err := limiters[l].Check(context.Background(), checks[l][k], &d)
			switch {
			case stopped.Load():
				if err == nil && d.Allowed {
					late[l].Add(1)
				}
			case err != nil:
				errored[l].Add(1)
			case d.Allowed:
				allowed[l].Add(1)
				at := time.Now().UnixMicro()
				mu.Lock()
				admittedAt[l][k] = append(admittedAt[l][k], at)
				mu.Unlock()
			}
		}
		if !stopped.Swap(true) {
			stop = time.Now()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(time.Since(stop).Microseconds())/1000, "tail-ms")
	if err := a.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	// What the store refused or never got of the cost Async admitted: its
	// over-admission (one process: 0 unless a flush failed).
	s := a.Stats()
	b.ReportMetric(float64(s.Unrecorded+s.Dropped), "async-unrecorded")
	b.ReportMetric(float64(allowed[0].Load()), "store-allowed")
	b.ReportMetric(float64(late[0].Load()), "store-tail-allowed")
	base := float64(max(1, allowed[0].Load()))
	b.ReportMetric(float64(allowed[1].Load())/base, "denycache-xstore")
	b.ReportMetric(float64(allowed[2].Load())/base, "async-xstore")
	for l, name := range []string{"store", "denycache", "async"} {
		var most float64
		for k := range admittedAt[l] {
			most = max(most, maxWindowEstimate(admittedAt[l][k], 1e6))
		}
		b.ReportMetric(most, name+"-maxest")
	}
	b.ReportMetric(float64(errored[0].Load()), "store-errors")
	b.ReportMetric(float64(errored[1].Load()), "denycache-errors")
	b.ReportMetric(float64(errored[2].Load()), "async-errors")
}

// maxWindowEstimate replays admissions at times ts (µs) through the
// sliding window of window µs (internal/algo's, the stores' own estimate)
// and returns the largest estimate just after an admission.
func maxWindowEstimate(ts []int64, window int64) float64 {
	slices.Sort(ts)
	var st algo.Window
	p := algo.Params{Rate: 1, Window: window}
	var most float64
	for _, at := range ts {
		used, _ := st.Record(p, at, 1)
		most = max(most, used)
	}
	return most
}

// BenchmarkSpread: 100,000 keys under their limits, 64 callers, one Redis:
// the Redis store against the same store behind an Async limiter (default
// options), in the steady state of such traffic: before its first timed
// run each contender checks every key three times in a short while (keys
// in blocks of spreadBlock, each block three times over), so that every
// key has a view (an Async makes a key's slot at its third answer within
// the last half to one MaxKeys keys answered; checked in one long random
// stream, every 0.8 s, the keys get theirs over some seconds, each view
// leaving fewer keys to mark). After each async run everything owed is flushed; the
// over-admission the limiter measured (cost the store refused because a
// key was full, and cost dropped) is reported as over/op, the store calls
// its flushes made as flushcalls/op.
func BenchmarkSpread(b *testing.B) {
	const spreadBlock = 1000
	srv := redistest.Standalone(b)
	store := newBenchStore(b, srv)
	checks := make([]sluice.Check, 100_000)
	for i := range checks {
		checks[i] = check(1, hit(fmt.Sprintf("user-%06d", i), "1000000r/h", sluice.SlidingWindow))
	}
	next := func(r *rand.Rand) sluice.Check { return checks[r.IntN(len(checks))] }
	a := newBenchAsync(b, store, edge.AsyncOptions{})
	warm := map[sluice.Limiter]bool{}
	warmUp := func(b *testing.B, l sluice.Limiter) {
		if !warm[l] {
			for i := 0; i < len(checks); i += spreadBlock {
				block := checks[i:min(i+spreadBlock, len(checks))]
				for range 3 {
					warmUp(b, l, block)
				}
			}
			warm[l] = true
		}
	}
	b.Run("store", func(b *testing.B) {
		warmUp(b, store)
		runCallers(b, store, srv, next)
	})
	b.Run("async", func(b *testing.B) {
		warmUp(b, a)
		s0 := a.Stats()
		runCallers(b, a, srv, next)
		if err := a.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		s := a.Stats()
		b.ReportMetric(float64(s.Unrecorded+s.Dropped-s0.Unrecorded-s0.Dropped)/float64(b.N), "over/op")
		b.ReportMetric(float64(s.FlushCalls-s0.FlushCalls)/float64(b.N), "flushcalls/op")
		b.ReportMetric(float64(s.Sync-s0.Sync)/float64(b.N), "sync/op")
	})
}

// warmUp makes every check once, from callers goroutines, trying a
// failed one again (up to 10 times): a store under load may time out.
func warmUp(b *testing.B, l sluice.Limiter, checks []sluice.Check) {
	b.Helper()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			var d sluice.Decision
			for i := next.Add(1) - 1; i < int64(len(checks)); i = next.Add(1) - 1 {
				for try := 0; l.Check(context.Background(), checks[i], &d) != nil; try++ {
					if failed.Add(1); try == 10 {
						b.Errorf("warm-up: check %d failed 10 times", i)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Logf("warm-up: %d checks failed and were tried again", failed.Load())
	}
}

// BenchmarkFirstSight: keys each checked about once (drawn from 1,000,000,
// or b.N if more, fresh per run), 64 callers, one Redis: the store alone
// and an Async limiter (whose first checks of a key go to the store),
// beside two floors of one write per key. Each run starts
// on an empty Redis (FLUSHALL before it, not measured): a run after
// another would pay for the keys it left (bigger tables, their expiry).
// It measures a Redis that grows: every key is new to its tables and
// memory (BenchmarkFirstSightSteady measures one whose keys expire).
// An Async's CPU and Redis's per decision include its Close, which sends
// what the run left owed. Redis's commands per decision are reported by
// name (INFO commandstats: <command>-calls/op, <command>-ns/op, the time
// Redis spent in them), with its expiry cycle's time (expire-ns/op) and
// the keys it held before and after (keys-before, keys-after).
func BenchmarkFirstSight(b *testing.B) { benchFirstSight(b, "10r/m", false) }

// BenchmarkFirstSightSteady is BenchmarkFirstSight in a steady state, as
// in production, where keys expire as fast as new ones come and Redis
// reuses their memory: the limit is 10r/s (a key expires 1-2 s after
// it is written), and before the measured run the same limiter checks
// b.N keys of another prefix (not measured), so that Redis already holds
// about as many keys as expire meanwhile, its tables sized and its memory
// allocated. Redis's CPU per decision includes the expiry of keys, as a
// key's cost in production does (expire-ns/op, expired/op).
func BenchmarkFirstSightSteady(b *testing.B) { benchFirstSight(b, "10r/s", true) }

func benchFirstSight(b *testing.B, limit string, steady bool) {
	srv := redistest.Standalone(b)
	store := newBenchStore(b, srv)
	var runs atomic.Int64
	for _, c := range []struct {
		name  string
		first int64
		floor string // a floorLimiter's write, for the floor contenders
	}{{"store", -1, ""}, {"async", 0, ""}, {"floor-setnx", -1, "setnx"}, {"floor-hincrby", -1, "hincrby"}} {
		b.Run(c.name, func(b *testing.B) {
			var l sluice.Limiter = store
			var a *edge.Async
			// The limit parsed once: the callers' own work per check is
			// drawing a key and making its string (about 0.1 µs).
			h := hit("", limit, sluice.SlidingWindow)
			var floor *floorLimiter
			if c.floor != "" {
				floor = newFloorLimiter(srv.Client(), c.floor, h.Limit.Window)
				l = floor
			} else if c.first >= 0 {
				a = newBenchAsync(b, store, edge.AsyncOptions{FirstSight: c.first, MaxKeys: 1_000_000, MaxBytes: 1 << 30})
				l = a
			}
			keys := max(1_000_000, b.N) // each checked about once, whatever b.N
			checks := func(prefix string) func(r *rand.Rand) sluice.Check {
				return func(r *rand.Rand) sluice.Check {
					h := h
					h.Key = prefix + strconv.Itoa(r.IntN(keys))
					return check(1, h)
				}
			}
			run := runs.Add(1)
			if err := srv.Do("FLUSHALL", "SYNC").Error(); err != nil {
				b.Fatal(err)
			}
			if steady {
				if floor != nil {
					// A floor of its own, all sent before the run.
					warm := newFloorLimiter(srv.Client(), c.floor, h.Limit.Window)
					fill(b, warm, b.N, checks(fmt.Sprintf("warm-%d-", run)))
					if err := warm.Close(); err != nil {
						b.Fatal(err)
					}
				} else {
					fill(b, l, b.N, checks(fmt.Sprintf("warm-%d-", run)))
				}
			}
			keys0 := dbSize(b, srv)
			s0, rcpu0, cpu0 := readRedisStats(b, srv), redisCPU(b, srv), cpuTime()
			runCallers(b, l, srv, checks(fmt.Sprintf("tok-%d-", run)))
			if a != nil {
				if err := a.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			if floor != nil {
				if err := floor.Close(); err != nil {
					b.Fatal(err)
				}
			}
			reportRedisStats(b, s0, readRedisStats(b, srv))
			b.ReportMetric(float64((redisCPU(b, srv)-rcpu0).Nanoseconds())/float64(b.N), "redis-cpu-ns/op")
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(keys0), "keys-before")
			b.ReportMetric(float64(dbSize(b, srv)), "keys-after")
			if a != nil {
				s := a.Stats()
				b.ReportMetric(float64(s.Unrecorded+s.Dropped)/float64(b.N), "over/op")
				b.ReportMetric(float64(s.Sync)/float64(b.N), "sync/op")
			}
		})
	}
}

// fill runs n checks through l from callers goroutines, unmeasured: a
// steady state's warm-up. Failed checks are counted and logged, not fatal.
func fill(b *testing.B, l sluice.Limiter, n int, next func(r *rand.Rand) sluice.Check) {
	b.Helper()
	var left, failed atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
			var d sluice.Decision
			for left.Add(-1) >= 0 {
				if l.Check(context.Background(), next(r), &d) != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Logf("warm-up: %d of %d checks failed", failed.Load(), n)
	}
}

// dbSize returns the keys srv holds (DBSIZE).
func dbSize(b *testing.B, srv *redistest.Server) int64 {
	b.Helper()
	n, err := srv.Do("DBSIZE").AsInt64()
	if err != nil {
		b.Fatalf("DBSIZE: %v", err)
	}
	return n
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
	b.Run("baseline", func(b *testing.B) { runCallers(b, denyAll{}, nil, next) })
	b.Run("hit", func(b *testing.B) { runCallers(b, dc, nil, next) })
}
