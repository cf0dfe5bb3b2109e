package openresty

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/keyname"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestBadStateIsNotAnOutage is redisstore's test of that name through
// nginx: foreign data under the prefix (a string where a limit's state
// belongs, for a check alone and for checks batched in one call) makes the
// checks of that key alone be decided by the policy; the breaker
// (breaker_failures = 2) never opens, a healthy key is decided by the
// store meanwhile, the log has the bad-state line with the key's digest
// and never the key, and once the key is reset it is limited again.
func TestBadStateIsNotAnOutage(t *testing.T) {
	srv := redistest.Standalone(t)
	const badKey = "poison2"
	for _, policy := range []string{"closed", "open"} {
		for _, batch := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/batch=%v", policy, batch), func(t *testing.T) {
				prefix := fmt.Sprintf("bs%s%v:", policy, batch)
				n := startNginx(t, 2, harnessConf(t, breakerConf+fmt.Sprintf(`
        location = /api {
            access_by_lua_block {
                local sluice = require "sluice"
                if not pcall(sluice.limiter, "api") then
                    sluice.define("api", { redis = %q, prefix = %q, timeout = 2000, policy = %q,
                        batch = %v, breaker = "sluice_breaker", breaker_failures = 2 })
                end
                sluice.limiter("api"):access{ zone = "cz", from = "query:token", limits = "3r/m" }
            }
            content_by_lua_block { ngx.say("app") }
        }
        location = /reset-api {
            content_by_lua_block {
                local sluice = require "sluice"
                local l = sluice.limiter("api")
                local ok, err = l:reset{ hits = { { zone = "cz", key = sluice.key{ from = "query:token" },
                    limit = sluice.parse_limit("3r/m") } }, cost = 0 }
                ngx.say(ok and "ok" or err)
            }
        }
`, srv.URL(), prefix, policy, batch)))
				if err := srv.Do("SET", prefix+"cz{"+badKey+"}:W60000000", "garbage").Error(); err != nil {
					t.Fatal(err)
				}
				want := http.StatusOK
				if policy == "closed" {
					want = http.StatusTooManyRequests
				}
				for i := range 12 {
					resp, body := get(t, n.url+"/api?token="+badKey)
					if resp.StatusCode != want {
						t.Fatalf("bad key, request %d: %s %q, want %d by the %s policy", i+1, resp.Status, body, want, policy)
					}
				}
				if got := strings.TrimSpace(mustGet(t, n.url+"/breaker")); got != "closed" {
					t.Fatalf("breaker %s after 12 checks on the bad key, want closed", got)
				}
				for i := range 3 {
					if resp, body := get(t, n.url+"/api?token=healthy"); resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") == "" {
						t.Fatalf("healthy key, request %d: %s %q, want 200 from the store", i+1, resp.Status, body)
					}
				}
				if resp, _ := get(t, n.url+"/api?token=healthy"); resp.StatusCode != http.StatusTooManyRequests {
					t.Fatalf("healthy key, 4th request of 3r/m: %s, want 429 from the store", resp.Status)
				}
				// The log line is written by each worker that saw a bad
				// check; nginx writes it to stderr, read here.
				deadline := time.Now().Add(5 * time.Second)
				for !strings.Contains(n.Log(), keyname.Of(badKey)) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				log := n.Log()
				if !strings.Contains(log, "failed on the stored state of its keys") || !strings.Contains(log, keyname.Of(badKey)) {
					t.Errorf("log %q: want the bad-state line with the key's digest %s", log, keyname.Of(badKey))
				}
				if strings.Contains(log, badKey) || strings.Contains(log, "breaker open") {
					t.Errorf("log %q: names the key or opened the breaker", log)
				}
				if got := strings.TrimSpace(mustGet(t, n.url+"/reset-api?token="+badKey)); got != "ok" {
					t.Fatalf("reset: %s", got)
				}
				for i := range 4 {
					wantAfter := http.StatusOK
					if i == 3 {
						wantAfter = http.StatusTooManyRequests
					}
					if resp, _ := get(t, n.url+"/api?token="+badKey); resp.StatusCode != wantAfter {
						t.Fatalf("after reset, request %d: %s, want %d", i+1, resp.Status, wantAfter)
					}
				}
			})
		}
	}
}
