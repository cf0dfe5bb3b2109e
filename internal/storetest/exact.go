package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// testFreshExact: at one frozen instant, a fresh limit admits exactly Rate,
// for every algorithm and every rate 1–1000 per second, minute, hour and
// day. Each limit spends Rate − 1 in one check, then 1 (allowed), then 1
// more (denied, with Remaining 0 and a RetryAfter); rates up to 20 also
// spend their Rate in unit checks, so that a sum of many small costs is
// exact too. internal/algo holds the same for unit checks at every rate.
func testFreshExact(t *testing.T, f Factory) {
	periods := []struct {
		unit string
		w    time.Duration
	}{{"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		for _, p := range periods {
			t.Run(p.unit, func(t *testing.T) {
				h := newHarness(t, f)
				h.at(123_457 * time.Microsecond) // aligned to nothing
				rates := make(chan int64)
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						for rate := range rates {
							if why := spendFresh(h.lim, a, rate, p.w, p.unit); why != "" {
								t.Error(why)
							}
						}
					})
				}
				for rate := int64(1); rate <= 1000; rate++ {
					rates <- rate
				}
				close(rates)
				wg.Wait()
			})
		}
	})
}

// spendFresh spends a fresh limit of rate per w as testFreshExact says and
// returns what went wrong, or "".
func spendFresh(lim sluice.Limiter, a sluice.Algorithm, rate int64, w time.Duration, unit string) string {
	l := limit(a, rate, w)
	key := fmt.Sprintf("fresh-%d%s", rate, unit)
	var d sluice.Decision
	check := func(key string, cost int64) (sluice.HitResult, string) {
		c := sluice.Check{Hits: []sluice.Hit{{Key: key, Limit: l}}, Cost: cost}
		if err := lim.Check(context.Background(), c, &d); err != nil {
			return sluice.HitResult{}, fmt.Sprintf("%dr/%s %s: %v", rate, unit, a, err)
		}
		return d.Hits[0], ""
	}
	// Forget the keys afterwards: the suite also runs on a store of 64 keys.
	defer lim.Reset(context.Background(), sluice.Check{Hits: []sluice.Hit{{Key: key, Limit: l}}})
	defer lim.Reset(context.Background(), sluice.Check{Hits: []sluice.Hit{{Key: key + "-units", Limit: l}}})
	steps := []int64{1, 1}
	if rate > 1 {
		steps = []int64{rate - 1, 1, 1}
	}
	for i, cost := range steps {
		r, err := check(key, cost)
		if err != "" {
			return err
		}
		if last := i == len(steps)-1; r.Allowed == last {
			return fmt.Sprintf("%dr/%s %s: check %d of cost %d: allowed %v, want %v (%+v)", rate, unit, a, i+1, cost, r.Allowed, !last, r)
		}
		if i == len(steps)-1 && (r.Remaining != 0 || r.RetryAfter <= 0) {
			return fmt.Sprintf("%dr/%s %s: denied with %+v, want Remaining 0 and a RetryAfter", rate, unit, a, r)
		}
	}
	if rate > 20 {
		return ""
	}
	for i := range rate + 1 {
		r, err := check(key+"-units", 1)
		if err != "" {
			return err
		}
		if want := i < rate; r.Allowed != want {
			return fmt.Sprintf("%dr/%s %s: unit check %d: allowed %v, want %v (%+v)", rate, unit, a, i+1, r.Allowed, want, r)
		}
	}
	return ""
}

// testGroupIdentity: Group is part of a state's identity in every store.
// The same zone, key and limit under different groups (none included) are
// different states, a Reset under one group leaves the others, and within
// one group different keys stay apart.
func testGroupIdentity(t *testing.T, f Factory) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		h := newHarness(t, f)
		l := limit(a, 100, time.Minute)
		groups := []string{"", "g1", "g2", "{g1}", "g1:", "k"}
		check := func(group, key string, cost int64) sluice.Check {
			return sluice.Check{Group: group, Cost: cost, Hits: []sluice.Hit{{Zone: "z", Key: key, Limit: l}}}
		}
		for i, g := range groups {
			h.check(check(g, "k", int64(i+1)))
			h.check(check(g, "other", 50))
		}
		for i, g := range groups {
			if got := h.peek(check(g, "k", 1), 0).Used; !same(got, float64(i+1)) {
				t.Errorf("group %q key k: used %v, want %d", g, got, i+1)
			}
			if got := h.peek(check(g, "other", 1), 0).Used; !same(got, 50) {
				t.Errorf("group %q key other: used %v, want 50", g, got)
			}
		}
		h.reset(check("g1", "k", 0))
		for i, g := range groups {
			want := float64(i + 1)
			if g == "g1" {
				want = 0
			}
			if got := h.peek(check(g, "k", 1), 0).Used; !same(got, want) {
				t.Errorf("after resetting group g1: group %q key k used %v, want %v", g, got, want)
			}
		}
	})
}
