package openresty

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
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

// TestDenyCacheAccessRepeatsTheStoreAnswer: through access() with one
// limit and the deny cache, the store's denial, the dict's and the
// memo's (the worker's copy, answered without reading the denial from the
// dict) are the same answer: status, every field and the problem, with
// Retry-After and the RateLimit wait in whole seconds. A reset ends the
// repeated denial at once: the next request is admitted, as the store
// admits it.
func TestDenyCacheAccessRepeatsTheStoreAnswer(t *testing.T) {
	srv := redistest.Standalone(t)
	locs := `
        location = /deny {
            access_by_lua_block {
                require("sluice").limiter("dc"):access{ zone = "dc", key = ngx.var.arg_key, limits = "3r/m", algorithm = "gcra" }
            }
            content_by_lua_block { ngx.say("ok") }
        }
        location = /deny-reset {
            content_by_lua_block {
                local sluice = require "sluice"
                local l = assert(sluice.limit{ rate = 3, window = "1m", algorithm = "gcra" })
                local ok, err = sluice.limiter("dc"):reset{ hits = { { zone = "dc", key = ngx.var.arg_key, limit = l } } }
                ngx.say(ok and "ok" or err)
            }
        }
        location = /deny-memo {
            content_by_lua_block { ngx.say(require("sluice").limiter("dc").edge.nmemo) }
        }
`
	n := startNginx(t, 1, func(listen string) string {
		return harnessConf(t, locs)(listen) + fmt.Sprintf(`
    init_by_lua_block {
        require("sluice").define("dc", { redis = %q, timeout = 2000, deny_cache = "sluice_deny" })
    }
`, srv.URL())
	})
	key := fmt.Sprintf("memo-%d", time.Now().UnixNano())
	for i := range 3 {
		if resp, body := get(t, n.url+"/deny?key="+key); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %s %q, want 200", i+1, resp.Status, body)
		}
	}
	// The 4th is the store's denial, the 5th the dict's, the rest the
	// memo's; GCRA's wait for one more of 3 a minute is 20 s.
	for i := range 20 {
		resp, body := get(t, n.url+"/deny?key="+key)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("denial %d: %s, want 429", i+1, resp.Status)
		}
		retry := resp.Header.Get("Retry-After")
		secs, err := strconv.Atoi(retry)
		if err != nil || secs < 19 || secs > 20 {
			t.Fatalf("denial %d: Retry-After %q, want 19 or 20", i+1, retry)
		}
		want := []string{
			`"3r/m";q=3;w=60`,
			`"3r/m";r=0;t=` + retry,
			"application/problem+json", "no-store", "nosniff",
			`{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded","status":429,"detail":"the rate limit is exceeded; retry after ` + retry + ` s","violated-policies":["3r/m"]}` + "\n",
		}
		got := []string{resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit"), resp.Header.Get("Content-Type"),
			resp.Header.Get("Cache-Control"), resp.Header.Get("X-Content-Type-Options"), body}
		if !slices.Equal(got, want) {
			t.Fatalf("denial %d:\n got %q\nwant %q", i+1, got, want)
		}
		if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
			t.Fatalf("denial %d: Content-Length %s for %d bytes", i+1, cl, len(body))
		}
	}
	if got := strings.TrimSpace(mustGet(t, n.url+"/deny-memo")); got != "1" {
		t.Fatalf("%s entries in the memo after 20 denials of one key, want 1", got)
	}
	if got := strings.TrimSpace(mustGet(t, n.url+"/deny-reset?key="+key)); got != "ok" {
		t.Fatalf("reset: %s", got)
	}
	if resp, body := get(t, n.url+"/deny?key="+key); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the reset: %s %q, want 200 (the memo repeated a denial the store no longer makes)", resp.Status, body)
	}
	if got := strings.TrimSpace(mustGet(t, n.url+"/deny-memo")); got != "0" {
		t.Fatalf("%s entries in the memo after the reset, want 0", got)
	}
}
