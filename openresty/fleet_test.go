package openresty

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/internal/workertest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestSameScriptsAsGo: after SCRIPT FLUSH, one check by the Go store
// loads its decide script, and Redis then knows the digest of the script
// in lib/sluice/scripts.lua: the module runs the Go store's very script.
func TestSameScriptsAsGo(t *testing.T) {
	srv := redistest.Standalone(t)
	srv.Do("SCRIPT", "FLUSH")
	s, err := redisstore.New(srv.Client(), redisstore.Options{MaxBatch: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := sluice.Allow(context.Background(), s, "k", sluice.Limit{Rate: 1, Window: time.Second}); err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum([]byte(scriptSource(t, "decide.lua", true)))
	got, err := srv.Do("SCRIPT", "EXISTS", hex.EncodeToString(sum[:])).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := got[0].AsInt64(); n != 1 {
		t.Fatal("Redis does not know the module's decide script after the Go store ran its own: they differ")
	}
}

// randomCheck returns a check of seeded random traffic: 1 to 3 hits over a
// few keys and zones, every algorithm, sometimes a group, a shadow limit
// or a peek.
func randomCheck(r *rand.Rand, keys []string) sluice.Check {
	algos := sluice.Algorithms()
	n := 1 + r.IntN(3)
	c := sluice.Check{}
	windows := []time.Duration{time.Second, 10 * time.Second, time.Minute}
	rates := []int64{1, 3, 10, 50}
	for len(c.Hits) < n {
		a := algos[r.IntN(len(algos))]
		l := sluice.Limit{Rate: rates[r.IntN(len(rates))], Window: windows[r.IntN(len(windows))], Algorithm: a}
		if a == sluice.Buckets {
			l.Resolution = l.Window / 5
		}
		l.Shadow = r.IntN(8) == 0
		h := sluice.Hit{Zone: []string{"", "z"}[r.IntN(2)], Key: keys[r.IntN(len(keys))], Limit: l}
		dup := false
		for _, o := range c.Hits {
			dup = dup || o.Zone == h.Zone && o.Key == h.Key && o.Limit.Algo() == l.Algo() && o.Limit.Window == l.Window && o.Limit.Bucket() == l.Bucket()
		}
		if !dup {
			c.Hits = append(c.Hits, h)
		}
	}
	minRate := int64(math.MaxInt64)
	for _, h := range c.Hits {
		minRate = min(minRate, h.Limit.Rate)
	}
	c.Cost = 1
	switch r.IntN(6) {
	case 0:
		c.Cost = 0
	case 1:
		c.Cost = 1 + r.Int64N(minRate)
	}
	if r.IntN(5) == 0 {
		c.Group = "g"
	}
	c.Shadow = r.IntN(20) == 0
	return c
}

// sameDecision reports how d (the module's) differs from want (the Go
// store's), or "". Decay's Used and waits go through exp and log, which
// LuaJIT and Go may round an ulp apart.
func sameDecision(d, want *sluice.Decision) string {
	if d.Allowed != want.Allowed || d.Shadowed != want.Shadowed || storetest.DenierOf(d) != storetest.DenierOf(want) || len(d.Hits) != len(want.Hits) {
		return fmt.Sprintf("decision %+v, Go store's %+v", d, want)
	}
	for i := range d.Hits {
		g, w := d.Hits[i], want.Hits[i]
		near := func(a, b float64, tol float64) bool { return math.Abs(a-b) <= tol*max(1, math.Abs(b)) }
		dur := func(a, b time.Duration) bool { return a-b <= time.Microsecond && b-a <= time.Microsecond }
		if g.Allowed != w.Allowed || g.Shadow != w.Shadow || g.Remaining != w.Remaining ||
			!near(g.Used, w.Used, 1e-12) || !dur(g.RetryAfter, w.RetryAfter) || !dur(g.ResetAfter, w.ResetAfter) {
			return fmt.Sprintf("hit %d: %+v, Go store's %+v", i, g, w)
		}
	}
	return ""
}

// runSameDecisions sends the same seeded traffic, on one fake clock, to the
// Go store and to the module (each under its own prefix of one Redis) and
// requires equal decisions, check by check.
func runSameDecisions(t *testing.T, client rueidis.Client, redisURL string, n *nginx) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			clock := new(storetest.Clock)
			prefix := fmt.Sprintf("same%d-%d:", seed, time.Now().UnixNano())
			gs, err := redisstore.New(client, redisstore.Options{Now: clock.Now, Prefix: "go" + prefix, MaxBatch: 1, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer gs.Close()
			lua := &luaLimiter{url: n.url, redis: redisURL, prefix: "lua" + prefix, now: clock.Now, client: newHTTPClient()}
			r := rand.New(rand.NewPCG(seed, 14))
			keys := []string{"alpha", "beta", "gamma{x}", "\xff\xfe"}
			var want, got sluice.Decision
			for i := range 400 {
				c := randomCheck(r, keys)
				ctx := context.Background()
				if err := gs.Check(ctx, c, &want); err != nil {
					t.Fatalf("check %d: Go store: %v", i, err)
				}
				if err := lua.Check(ctx, c, &got); err != nil {
					t.Fatalf("check %d: module: %v", i, err)
				}
				if diff := sameDecision(&got, &want); diff != "" {
					t.Fatalf("check %d at %v (%+v): %s", i, clock.Since(), c, diff)
				}
				clock.Advance(time.Duration(r.Int64N(int64(3 * time.Second))))
				if r.IntN(50) == 0 {
					clock.Advance(-time.Duration(r.Int64N(int64(time.Second)))) // a clock behind the state
				}
			}
		})
	}
}

// TestSameDecisionsAsGo: standalone Redis.
func TestSameDecisionsAsGo(t *testing.T) {
	srv := redistest.Standalone(t)
	n := startNginx(t, 1, harnessConf(t, ""))
	runSameDecisions(t, srv.Client(), srv.URL(), n)
}

// TestSameDecisionsAsGoCluster: a 3+3 Cluster, where checks whose hits
// span slots are decided per slot and refunded when another slot denies,
// by both.
func TestSameDecisionsAsGoCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	n := startNginx(t, 2, harnessConf(t, ""))
	runSameDecisions(t, c.Client(), c.URL(), n)
}

// hotConf is a location that admits a request when the module's access()
// allows key under limits with algorithm, on the Redis at redisURL.
func hotConf(redisURL string) string {
	return fmt.Sprintf(`
        location = /hot {
            access_by_lua_block {
                local sluice = require "sluice"
                local lim = package.loaded.hot_limiter
                if not lim then
                    lim = assert(sluice.new{ redis = %q, timeout = 2000 })
                    package.loaded.hot_limiter = lim
                end
                lim:access{ zone = "hot", key = ngx.var.arg_key, limits = ngx.var.arg_limits, algorithm = ngx.var.arg_algo,
                    resolution = tonumber(ngx.var.arg_resolution) }
            }
            content_by_lua_block { ngx.say("ok") }
        }
`, redisURL)
}

// TestMixedFleet: two nginx (two workers each) and two Go processes (this
// test binary re-run as workers, each with its own redisstore.Store,
// connections and call ids) spend one hot key at once, on the Redis clock. The admitted total is exactly the limit, as one store
// admits: nothing over, nothing under.
func TestMixedFleet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster bool
	}{{"standalone", false}, {"cluster", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cluster && testing.Short() {
				t.Skip("starts a six-node Cluster")
			}
			var url string
			if tc.cluster {
				url = redistest.NewCluster(t).URL()
			} else {
				url = redistest.Standalone(t).URL()
			}
			n1 := startNginx(t, 2, harnessConf(t, hotConf(url)))
			n2 := startNginx(t, 2, harnessConf(t, hotConf(url)))
			for _, algo := range sluice.Algorithms() {
				t.Run(string(algo), func(t *testing.T) {
					runMixedFleet(t, url, []*nginx{n1, n2}, algo)
				})
			}
		})
	}
}

func runMixedFleet(t *testing.T, url string, fronts []*nginx, algo sluice.Algorithm) {
	const rate, perFront, workers = 120, 120, 8
	// A day's window: the test ends long before any of it slides out.
	limit := sluice.Limit{Rate: rate, Window: 24 * time.Hour, Algorithm: algo}
	if algo == sluice.Buckets {
		limit.Resolution = time.Hour
	}
	key := fmt.Sprintf("hot-%d", time.Now().UnixNano())
	// The Go side: two processes (this test binary re-run as a worker),
	// each with its own store, connections and call ids.
	procs := workertest.Start(t, goWorkerEnv, workertest.Job{URL: url, Goroutines: workers, Checks: perFront / workers,
		Hit: sluice.Hit{Zone: "hot", Key: key, Limit: limit}}, 2)
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	client := newHTTPClient()
	res := ""
	if algo == sluice.Buckets {
		res = "&resolution=3600000000"
	}
	// The first requests of an nginx worker load the module: a few on
	// another key first, so that both sides start warm.
	for _, n := range fronts {
		for range 4 {
			resp, err := client.Get(n.url + "/hot?key=" + key + "-warm&limits=1r/s")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	for _, n := range fronts {
		for range workers {
			wg.Go(func() {
				for range perFront / workers {
					resp, err := client.Get(n.url + "/hot?key=" + key + "&limits=" + fmt.Sprint(rate) + "r/d&algo=" + string(algo) + res)
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					switch resp.StatusCode {
					case http.StatusOK:
						admitted.Add(1)
					case http.StatusTooManyRequests:
						denied.Add(1)
					default:
						t.Errorf("nginx answered %s", resp.Status)
					}
				}
			})
		}
	}
	for _, p := range procs {
		if err := p.Go(); err != nil {
			t.Fatal(err)
		}
	}
	var goAdmitted int64
	for i, p := range procs {
		var r workertest.Result
		if err := p.Result(&r); err != nil {
			t.Fatal(err)
		}
		if len(r.Errors) > 0 {
			t.Errorf("go process %d: %d errors, the first: %s", i, len(r.Errors), r.Errors[0])
		}
		if r.Allowed+r.Denied+int64(len(r.Errors)) != perFront {
			t.Errorf("go process %d decided %d checks, want %d", i, r.Allowed+r.Denied, perFront)
		}
		goAdmitted += r.Allowed
		admitted.Add(r.Allowed)
		denied.Add(r.Denied)
	}
	wg.Wait()
	t.Logf("admitted by nginx %d, by the Go processes %d", admitted.Load()-goAdmitted, goAdmitted)
	if got := admitted.Load(); got != rate {
		t.Errorf("admitted %d of %d (nginx %d, Go processes %d; denied %d), want exactly %d",
			got, 4*perFront, got-goAdmitted, goAdmitted, denied.Load(), rate)
	}
}
