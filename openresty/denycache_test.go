package openresty

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestDenyCacheNeverDeniesWhatTheStoreAllows: traffic over a limit goes
// to one key through the deny cache, and after every denial the cache
// repeats, the same check goes to the store directly. The cached denial
// says how long it still holds (RetryAfter); when the store is asked
// within that time of the cached answer, it must deny too. (Had it
// allowed, the cache would have denied what the store allows.)
func TestDenyCacheNeverDeniesWhatTheStoreAllows(t *testing.T) {
	srv := redistest.Standalone(t)
	n := startNginx(t, 2, harnessConf(t, ""))
	for _, algo := range sluice.Algorithms() {
		t.Run(string(algo), func(t *testing.T) {
			prefix := fmt.Sprintf("deny-%s-%d:", algo, time.Now().UnixNano())
			cached := &luaLimiter{url: n.url, redis: srv.URL(), prefix: prefix, edge: true, client: newHTTPClient()}
			store := &luaLimiter{url: n.url, redis: srv.URL(), prefix: prefix, client: newHTTPClient()}
			limit := sluice.Limit{Rate: 3, Window: 300 * time.Millisecond, Algorithm: algo}
			if algo == sluice.Buckets {
				limit.Resolution = 50 * time.Millisecond
			}
			c := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: limit}}, Cost: 1}
			ctx := context.Background()
			var hits, admitted, confirmed int
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for range 600 {
				<-tick.C
				var d sluice.Decision
				start := time.Now()
				if err := cached.Check(ctx, c, &d); err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
				if d.Source != sluice.FromDenyCache {
					continue
				}
				hits++
				if d.RetryAfter() <= 0 || d.RetryAfter() > 2*limit.Window {
					t.Fatalf("cached denial with RetryAfter %v", d.RetryAfter())
				}
				var sd sluice.Decision
				if err := store.Check(ctx, c, &sd); err != nil {
					t.Fatal(err)
				}
				// From before the cached answer to after the store's: at
				// least the time between the two decisions.
				if took := time.Since(start); sd.Allowed && took < d.RetryAfter() {
					t.Fatalf("the deny cache denied (RetryAfter %v) what the store allowed %v later", d.RetryAfter(), took)
				}
				if !sd.Allowed {
					confirmed++
				}
			}
			if hits < 100 || admitted < 3 || confirmed < 50 {
				t.Fatalf("%d denials from the cache (%d confirmed by the store), %d admitted: the test did not exercise it", hits, confirmed, admitted)
			}
		})
	}
}

// TestDenyCacheAdmitsAsTheStore: steady traffic over a limit, to one key
// behind the deny cache and to another without it, interleaved: both
// admit the same number. A cache that held denials past the store's would
// admit fewer (one fewer per denial held a period too long).
func TestDenyCacheAdmitsAsTheStore(t *testing.T) {
	srv := redistest.Standalone(t)
	n := startNginx(t, 2, harnessConf(t, ""))
	for _, algo := range []sluice.Algorithm{sluice.Log, sluice.GCRA, sluice.SlidingWindow} {
		t.Run(string(algo), func(t *testing.T) {
			cached := &luaLimiter{url: n.url, redis: srv.URL(), prefix: fmt.Sprintf("dc-%s-%d:", algo, time.Now().UnixNano()), edge: true, client: newHTTPClient()}
			plain := &luaLimiter{url: n.url, redis: srv.URL(), prefix: fmt.Sprintf("pl-%s-%d:", algo, time.Now().UnixNano()), client: newHTTPClient()}
			limit := sluice.Limit{Rate: 10, Window: time.Second, Algorithm: algo}
			c := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: limit}}, Cost: 1}
			var fromCache, admittedCached, admittedPlain int
			ctx := context.Background()
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for range 500 { // 2.5 s at 200 checks/s, 20x the limit
				<-tick.C
				var d sluice.Decision
				if err := cached.Check(ctx, c, &d); err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admittedCached++
				}
				if d.Source == sluice.FromDenyCache {
					fromCache++
				}
				if err := plain.Check(ctx, c, &d); err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admittedPlain++
				}
			}
			t.Logf("admitted %d behind the cache (%d denials from it), %d without", admittedCached, fromCache, admittedPlain)
			if fromCache < 100 {
				t.Errorf("only %d denials from the cache", fromCache)
			}
			if d := admittedCached - admittedPlain; d < -1 || d > 1 {
				t.Errorf("admitted %d behind the deny cache, %d without: want the same (±1 for the µs between the two checks)", admittedCached, admittedPlain)
			}
		})
	}
}
