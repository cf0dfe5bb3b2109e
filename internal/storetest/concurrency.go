package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// testConcurrency: many goroutines check a few keys on the real clock
// frozen at one instant, where every algorithm admits exactly Rate per
// key. Totals are conserved: each key admits exactly its Rate, and a shared
// resource checked together with per-consumer limits is never over-spent
// and spent exactly as the consumers were. Run it under -race.
func testConcurrency(t *testing.T, f Factory) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		frozen := time.Now().Truncate(time.Microsecond)
		lim := f(t, func() time.Time { return frozen })
		t.Run("keys", func(t *testing.T) { concurrentKeys(t, lim, a) })
		t.Run("resource", func(t *testing.T) { concurrentResource(t, lim, a) })
	})
}

const goroutines = 8

// hammer runs n checks in each of the goroutines; check(g, i) returns the
// check of goroutine g's i-th call, record(g, i, d) sees its decision.
func hammer(t *testing.T, lim sluice.Limiter, n int, check func(g, i int) sluice.Check, record func(g, i int, d *sluice.Decision)) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			var d sluice.Decision
			for i := range n {
				if err := lim.Check(context.Background(), check(g, i), &d); err != nil {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
				record(g, i, &d)
			}
		})
	}
	wg.Wait()
}

func concurrentKeys(t *testing.T, lim sluice.Limiter, a sluice.Algorithm) {
	const keys, rate, perGoroutine = 3, 40, 30
	l := limit(a, rate, time.Minute)
	var allowed [keys]atomic.Int64
	hammer(t, lim, perGoroutine,
		func(g, i int) sluice.Check { return one(fmt.Sprint("key-", (g+i)%keys), l) },
		func(g, i int, d *sluice.Decision) {
			if d.Allowed {
				allowed[(g+i)%keys].Add(1)
			}
		})
	var d sluice.Decision
	for k := range keys {
		c := one(fmt.Sprint("key-", k), l)
		c.Cost = 0
		if err := lim.Check(context.Background(), c, &d); err != nil {
			t.Fatal(err)
		}
		if got := d.Hits[0].Used; !same(got, rate) {
			t.Errorf("key %d: used %v after %d attempts, want exactly %d", k, got, goroutines*perGoroutine/keys, rate)
		}
		if got := allowed[k].Load(); got != rate {
			t.Errorf("key %d: %d checks admitted, want exactly %d", k, got, rate)
		}
	}
}

func concurrentResource(t *testing.T, lim sluice.Limiter, a sluice.Algorithm) {
	const consumers, resourceRate, consumerRate, perGoroutine = 4, 30, 12, 20
	resource := limit(a, resourceRate, time.Minute)
	consumer := limit(a, consumerRate, time.Minute)
	check := func(c int) sluice.Check {
		return sluice.Check{Group: "res", Cost: 1, Hits: []sluice.Hit{
			{Zone: "resource", Key: "res", Limit: resource},
			{Zone: "consumer", Key: fmt.Sprint("c-", c), Limit: consumer},
		}}
	}
	var admitted atomic.Int64
	hammer(t, lim, perGoroutine,
		func(g, _ int) sluice.Check { return check(g % consumers) },
		func(_, _ int, d *sluice.Decision) {
			if d.Allowed {
				admitted.Add(1)
			}
		})
	if got := admitted.Load(); got != resourceRate {
		t.Errorf("%d checks admitted, want exactly the resource's %d", got, resourceRate)
	}
	var d sluice.Decision
	var spent float64
	for c := range consumers {
		p := check(c)
		p.Cost = 0
		if err := lim.Check(context.Background(), p, &d); err != nil {
			t.Fatal(err)
		}
		if !same(d.Hits[0].Used, resourceRate) {
			t.Errorf("resource used %v, want %d", d.Hits[0].Used, resourceRate)
		}
		if d.Hits[1].Used > consumerRate {
			t.Errorf("consumer %d used %v, more than %d", c, d.Hits[1].Used, consumerRate)
		}
		spent += d.Hits[1].Used
	}
	if !same(spent, resourceRate) {
		t.Errorf("consumers spent %v in all, the resource %d", spent, resourceRate)
	}
}
