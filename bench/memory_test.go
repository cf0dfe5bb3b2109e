package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	golimiter "github.com/sethvargo/go-limiter/memorystore"
	"github.com/ulule/limiter/v3"
	ulmemory "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

// BenchmarkMemory compares the in-process limiters side by side: sluice's
// memstore (every algorithm) and the keyed in-memory limiters people use
// instead, on the same keys and the same limit, serial (one goroutine) and
// parallel (b.RunParallel: one goroutine per CPU). Names are key=value
// (workload=, limiter=, mode=) so that tools can pivot on them.
func BenchmarkMemory(b *testing.B) {
	for _, w := range []workload{spreadWorkload(), hotWorkload()} {
		for _, spec := range memoryContenders() {
			var c *contender
			get := func(b *testing.B) contender {
				if c == nil {
					built := spec.build(b, w)
					warm(b, built, w)
					c = &built
				}
				return *c
			}
			name := "workload=" + w.name + "/limiter=" + spec.name
			b.Run(name+"/mode=serial", func(b *testing.B) { runSerial(b, get(b), w) })
			b.Run(name+"/mode=parallel", func(b *testing.B) { runParallel(b, get(b), w) })
			if c != nil && c.close != nil {
				c.close()
			}
		}
	}
}

func memoryContenders() []contenderSpec {
	return append(sluiceMemoryContenders(),
		contenderSpec{"go-limiter", goLimiterMemory},
		contenderSpec{"ulule", ululeMemory},
		contenderSpec{"x-time-rate", xRateSyncMap},
	)
}

// goLimiterMemory is github.com/sethvargo/go-limiter's memorystore: one
// token bucket per key under an RWMutex-guarded map.
func goLimiterMemory(b *testing.B, w workload) contender {
	c := contender{name: "go-limiter"}
	store, err := golimiter.New(&golimiter.Config{Tokens: uint64(w.rate), Interval: w.window, InitialAlloc: len(w.keys)})
	if err != nil {
		b.Fatalf("go-limiter: %v", err)
	}
	c.caller = func() decideFunc {
		return func(ctx context.Context, key string) (bool, error) {
			_, _, _, ok, err := store.Take(ctx, key)
			return ok, err
		}
	}
	c.close = func() { _ = store.Close(context.Background()) }
	return c
}

// ululeMemory is github.com/ulule/limiter/v3 with its memory store: a fixed
// window counter per key.
func ululeMemory(b *testing.B, w workload) contender {
	c := contender{name: "ulule"}
	store := ulmemory.NewStoreWithOptions(limiter.StoreOptions{Prefix: "bench", CleanUpInterval: limiter.DefaultCleanUpInterval})
	lim := limiter.New(store, limiter.Rate{Period: w.window, Limit: w.rate})
	c.caller = func() decideFunc {
		return func(ctx context.Context, key string) (bool, error) {
			res, err := lim.Get(ctx, key)
			return !res.Reached, err
		}
	}
	return c
}

// xRateSyncMap is what a Go programmer writes with golang.org/x/time/rate:
// a sync.Map from key to *rate.Limiter, with a bucket of Rate tokens
// refilled over Window. It never forgets a key, which only makes it faster
// than a limiter that must bound its memory.
func xRateSyncMap(b *testing.B, w workload) contender {
	c := contender{name: "x-time-rate"}
	var m sync.Map
	every := rate.Every(w.window / time.Duration(w.rate))
	burst := int(w.rate)
	c.caller = func() decideFunc {
		return func(_ context.Context, key string) (bool, error) {
			v, ok := m.Load(key)
			if !ok {
				v, _ = m.LoadOrStore(key, rate.NewLimiter(every, burst))
			}
			return v.(*rate.Limiter).Allow(), nil
		}
	}
	return c
}
