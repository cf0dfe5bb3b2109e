package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/sluicehq/sluice/internal/redistest"
)

// callers is the number of goroutines checking at once in the Redis
// benchmarks, whatever GOMAXPROCS is.
const callers = 64

// BenchmarkRedis compares the Redis-backed limiters side by side against
// one local redis-server: sluice's redisstore (every algorithm),
// go-redis/redis_rate and ulule/limiter's Redis store, with 64 concurrent
// callers, on the spread and the hot workload. Besides ns/op (wall time
// divided by checks) it reports decisions/s and the p50 and p99 latency of
// one check in µs. The server is flushed before each contender.
func BenchmarkRedis(b *testing.B) {
	srv := redistest.Standalone(b)
	for _, w := range []workload{spreadWorkload(), hotWorkload()} {
		for _, spec := range redisContenders(srv) {
			var c *contender
			b.Run("workload="+w.name+"/limiter="+spec.name, func(b *testing.B) {
				if c == nil {
					flush(b, srv)
					built := spec.build(b, w)
					warmConcurrently(b, &built, w)
					c = &built
				}
				runCallers(b, *c, w, func() float64 { return serverCPU(b, srv) })
			})
			if c != nil && c.close != nil {
				c.close()
			}
		}
	}
}

// BenchmarkRedisMemory reports the Redis memory each limiter uses per
// tracked key. Each op starts tracking one more key: b.N keys (at most
// 100,000) get one check each from 64 callers on an empty server, under a
// limit of 10,000 per day so that no limiter lets its keys expire during
// the measurement; then the MEMORY USAGE of every key on the server is
// summed. B/key is that sum per tracked key; redis-keys/key is the number
// of Redis keys per tracked key.
func BenchmarkRedisMemory(b *testing.B) {
	srv := redistest.Standalone(b)
	for _, spec := range redisContenders(srv) {
		b.Run("limiter="+spec.name, func(b *testing.B) {
			flush(b, srv)
			keys := makeKeys(min(b.N, spreadKeys))
			w := workload{name: "memory", keys: keys, probes: keys, rate: 10_000, window: 24 * time.Hour}
			c := spec.build(b, w)
			if c.close != nil {
				defer c.close()
			}
			warmConcurrently(b, &c, w)
			b.StopTimer()
			bytes, present := memoryUsage(b, srv)
			if present == 0 {
				b.Fatalf("%s: no key on the server after %d checks", c.name, len(keys))
			}
			b.ReportMetric(float64(bytes)/float64(len(keys)), "B/key")
			b.ReportMetric(float64(present)/float64(len(keys)), "redis-keys/key")
		})
	}
}

func redisContenders(srv *redistest.Server) []contenderSpec {
	return append(sluiceRedisContenders(srv),
		contenderSpec{"minimal-script", func(b *testing.B, w workload) contender { return minimalRedis(b, srv, w) }},
		contenderSpec{"redis_rate", func(b *testing.B, w workload) contender { return redisRate(b, srv, w) }},
		contenderSpec{"ulule", func(b *testing.B, w workload) contender { return ululeRedis(b, srv, w) }},
	)
}

// goRedisClient is the client a go-redis user would hand the peers, with one
// connection per caller so that no caller waits for the pool.
func goRedisClient(srv *redistest.Server) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: callers, MinIdleConns: callers})
}

// redisRate is github.com/go-redis/redis_rate/v10: GCRA in one Lua script,
// with a burst of Rate.
func redisRate(b *testing.B, srv *redistest.Server, w workload) contender {
	rdb := goRedisClient(srv)
	lim := redis_rate.NewLimiter(rdb)
	limit := redis_rate.Limit{Rate: int(w.rate), Burst: int(w.rate), Period: w.window}
	return contender{
		name: "redis_rate",
		caller: func() decideFunc {
			return func(ctx context.Context, key string) (bool, error) {
				res, err := lim.Allow(ctx, key, limit)
				if err != nil {
					return false, err
				}
				return res.Allowed > 0, nil
			}
		},
		close: func() { _ = rdb.Close() },
	}
}

// ululeRedis is github.com/ulule/limiter/v3 with its Redis store: a fixed
// window counter per key, one Lua script per check.
func ululeRedis(b *testing.B, srv *redistest.Server, w workload) contender {
	rdb := goRedisClient(srv)
	store, err := ulredis.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "ulule"})
	if err != nil {
		b.Fatalf("ulule redis store: %v", err)
	}
	lim := limiter.New(store, limiter.Rate{Period: w.window, Limit: w.rate})
	return contender{
		name: "ulule",
		caller: func() decideFunc {
			return func(ctx context.Context, key string) (bool, error) {
				res, err := lim.Get(ctx, key)
				return !res.Reached, err
			}
		},
		close: func() { _ = rdb.Close() },
	}
}

// runCallers has exactly callers goroutines take b.N checks between them,
// each walking the workload's keys from its own offset, and times each
// check. cpu reads the server's CPU time in seconds: the difference over
// the timed loop, per check, is reported as redis-cpu-µs/op, a cost that
// other load on a shared machine barely changes.
func runCallers(b *testing.B, c contender, w workload, cpu func() float64) {
	var next, denied, failed atomic.Int64
	var lat latencies
	stride := max(1, len(w.probes)/callers)
	decides := make([]decideFunc, callers)
	owns := make([][]time.Duration, callers)
	for g := range callers {
		decides[g] = c.caller()
		owns[g] = make([]time.Duration, 0, 2*b.N/callers+16)
	}
	cpu0 := cpu()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			decide, own, ctx := decides[g], owns[g], context.Background()
			i, d, f := g*stride, int64(0), int64(0)
			for next.Add(1) <= int64(b.N) {
				start := time.Now()
				ok, err := decide(ctx, w.probes[i%len(w.probes)])
				own = append(own, time.Since(start))
				switch {
				case err != nil:
					if f++; f == 1 {
						b.Logf("%s: check: %v", c.name, err) // counted in errors/op
					}
				case !ok:
					d++
				}
				i++
			}
			denied.Add(d)
			failed.Add(f)
			lat.merge(own)
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu1 := cpu()
	report(b, c, w, int(denied.Load()), b.N-int(failed.Load()))
	b.ReportMetric(float64(failed.Load()), "errors")
	b.ReportMetric(float64(c.warmErrors), "warmup-errors")
	b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "redis-cpu-µs/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(lat.quantile(0.50).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat.quantile(0.99).Nanoseconds())/1e3, "p99-µs")
}

// warmConcurrently is warm with callers goroutines, each taking a share of
// the keys: one check per key of the spread workload would take seconds
// one round trip at a time. A check that fails is tried again, up to 10
// times, and counted in c.warmErrors (reported as warmup-errors); a key
// that fails 10 times fails the benchmark.
func warmConcurrently(b *testing.B, c *contender, w workload) {
	b.Helper()
	var wg sync.WaitGroup
	var failed atomic.Int64
	errs := make(chan error, callers)
	for g := range callers {
		wg.Go(func() {
			decide, ctx := c.caller(), context.Background()
			for i := g; i < len(w.keys); i += callers {
				for range 1 + w.rate {
					ok, err := decide(ctx, w.keys[i])
					for try := 1; err != nil; try++ {
						if failed.Add(1); try == 10 {
							errs <- fmt.Errorf("%s: warm-up check on %q failed 10 times: %w", c.name, w.keys[i], err)
							return
						}
						ok, err = decide(ctx, w.keys[i])
					}
					if !w.exhaust || !ok {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	c.warmErrors = failed.Load()
	if c.warmErrors > 0 {
		b.Logf("%s: %d warm-up checks failed and were tried again", c.name, c.warmErrors)
	}
	for err := range errs {
		b.Fatal(err)
	}
}

// serverCPU returns the CPU time, user plus system, the server has used
// since it started, in seconds (INFO cpu).
func serverCPU(b *testing.B, srv *redistest.Server) float64 {
	b.Helper()
	text, err := srv.Do("INFO", "cpu").ToString()
	if err != nil {
		b.Fatalf("INFO cpu: %v", err)
	}
	total := 0.0
	for _, line := range strings.Split(text, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %s: %v", line, err)
			}
			total += f
		}
	}
	return total
}

// flush empties the server, so each contender starts from the same state.
func flush(b *testing.B, srv *redistest.Server) {
	b.Helper()
	if err := srv.Do("FLUSHALL").Error(); err != nil {
		b.Fatalf("FLUSHALL: %v", err)
	}
}

// memoryUsage returns the sum of MEMORY USAGE (SAMPLES 0: exact) over every
// key of the server, and the number of keys.
func memoryUsage(b *testing.B, srv *redistest.Server) (bytes, keys int64) {
	b.Helper()
	client, ctx := srv.Client(), context.Background()
	cursor := uint64(0)
	for {
		entry, err := client.Do(ctx, client.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			b.Fatalf("SCAN: %v", err)
		}
		cmds := make(rueidis.Commands, 0, len(entry.Elements))
		for _, k := range entry.Elements {
			cmds = append(cmds, client.B().MemoryUsage().Key(k).Samples(0).Build())
		}
		for i, res := range client.DoMulti(ctx, cmds...) {
			n, err := res.AsInt64()
			if err != nil {
				b.Fatalf("MEMORY USAGE %q: %v", entry.Elements[i], err)
			}
			bytes += n
		}
		keys += int64(len(entry.Elements))
		if entry.Cursor == 0 {
			return bytes, keys
		}
		cursor = entry.Cursor
	}
}
