package openresty

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
)

// failTimeout is the module's Redis timeout in the failure tests, ms:
// short, yet long enough for a healthy Redis on a loaded test machine.
const failTimeout = 200

// slack is what a shared two-core machine may add to one decision's time
// beyond the module's timeout: scheduling, not waiting on Redis. The
// median decision must be within the timeout and a tenth of this.
const slack = 2 * time.Second

// breakerConf adds /breaker, which answers "open" while the breaker in the
// shared dict is open.
const breakerConf = `
        location = /breaker {
            content_by_lua_block {
                local d = ngx.shared.sluice_breaker
                for _, k in ipairs(d:get_keys(0)) do
                    if k:sub(-2) == "|u" and d:get(k) > ngx.now() then return ngx.say("open") end
                end
                ngx.say("closed")
            }
        }
`

// timedCheck decides c and fails the test when the module took longer
// than its timeout (plus slack) or gave no decision.
func timedCheck(t *testing.T, l *luaLimiter, c sluice.Check) sluice.Decision {
	t.Helper()
	var d sluice.Decision
	start := time.Now()
	if err := l.Check(context.Background(), c, &d); err != nil {
		t.Fatalf("check: %v, want a decision", err)
	}
	took := time.Since(start)
	if took > failTimeout*time.Millisecond+slack {
		t.Fatalf("decision took %v, more than the %dms timeout", took, failTimeout)
	}
	tookMu.Lock()
	tooks[t.Name()] = append(tooks[t.Name()], took)
	tookMu.Unlock()
	return d
}

// tooks are the decision times of each test, for checkMedian.
var (
	tookMu sync.Mutex
	tooks  = map[string][]time.Duration{}
)

// checkMedian fails the test when its median decision took more than the
// timeout and a tenth of the slack: single decisions may be slowed by the
// machine, the typical one may not.
func checkMedian(t *testing.T) {
	t.Helper()
	tookMu.Lock()
	d := slices.Clone(tooks[t.Name()])
	tookMu.Unlock()
	slices.Sort(d)
	if len(d) == 0 {
		t.Fatal("no decision timed")
	}
	if m := d[len(d)/2]; m > failTimeout*time.Millisecond+slack/10 {
		t.Errorf("median decision took %v over %d decisions, more than the %dms timeout", m, len(d), failTimeout)
	}
}

// waitStore checks c until the store decides it again (the breaker's probe
// succeeded), or fails after a bounded wait.
func waitStore(t *testing.T, l *luaLimiter, c sluice.Check) {
	t.Helper()
	c.Cost = 0
	deadline := time.Now().Add(20 * time.Second)
	for {
		var d sluice.Decision
		err := l.Check(context.Background(), c, &d)
		if err == nil && d.Source == sluice.FromStore {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store still does not decide 20s after Redis came back: %v %v", err, d.Source)
		}
		time.Sleep(50 * time.Millisecond) // the breaker's back-off runs on nginx's clock
	}
}

// expectPolicy holds a decision taken without Redis to policy.
func expectPolicy(t *testing.T, d sluice.Decision, policy string) {
	t.Helper()
	switch policy {
	case "open":
		if !d.Allowed || d.Source != sluice.FromFailOpen {
			t.Fatalf("decision %+v, want allowed by fail-open", d)
		}
	case "closed":
		if d.Allowed || d.Source != sluice.FromFailClosed || d.RetryAfter() != time.Second {
			t.Fatalf("decision %+v, want denied by fail-closed with RetryAfter 1s", d)
		}
	}
}

// exactly spends a fresh key of rate 5 and requires exactly 5 admitted.
func exactly(t *testing.T, l *luaLimiter, key string) {
	t.Helper()
	limit := sluice.Limit{Rate: 5, Window: time.Hour, Algorithm: sluice.Log}
	c := sluice.Check{Hits: []sluice.Hit{{Key: key, Limit: limit}}, Cost: 1}
	admitted := 0
	for range 8 {
		d := timedCheck(t, l, c)
		if d.Source != sluice.FromStore && (d.Allowed || d.Source != sluice.FromDenyCache) {
			t.Fatalf("decision %v from %v, want the store's (or a cached denial)", d.Allowed, d.Source)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("admitted %d of 8 on a fresh 5r/h, want 5", admitted)
	}
}

// TestRedisFailure: Redis killed, then SIGSTOPped, under both policies.
// Every check gets a decision within the timeout, the policy's, the
// breaker opens for every worker, and once Redis is back the store decides
// again, exactly.
func TestRedisFailure(t *testing.T) {
	for _, policy := range []string{"open", "closed"} {
		for _, fault := range []string{"kill", "sigstop"} {
			t.Run(policy+"/"+fault, func(t *testing.T) {
				defer checkMedian(t)
				srv := redistest.Standalone(t)
				n := startNginx(t, 2, harnessConf(t, breakerConf))
				l := &luaLimiter{url: n.url, redis: srv.URL(), prefix: "fail:", edge: true, policy: policy,
					timeout: failTimeout, client: newHTTPClient()}
				limit := sluice.Limit{Rate: 5, Window: time.Hour, Algorithm: sluice.Log}
				c := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: limit}}, Cost: 1}
				// The first call connects and loads the script, which a
				// loaded machine may not do within the short timeout.
				waitStore(t, l, c)
				for range 2 {
					if d := timedCheck(t, l, c); !d.Allowed || d.Source != sluice.FromStore {
						t.Fatalf("healthy: %+v", d)
					}
				}
				switch fault {
				case "kill":
					srv.Kill()
				case "sigstop":
					pid := srv.PID()
					if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
						t.Fatal(err)
					}
					resumed := false
					resume := func() {
						if !resumed {
							resumed = true
							syscall.Kill(pid, syscall.SIGCONT)
						}
					}
					t.Cleanup(resume)
					defer resume()
				}
				// Enough checks to open the breaker in both workers' view.
				for range 12 {
					expectPolicy(t, timedCheck(t, l, c), policy)
				}
				if got := strings.TrimSpace(mustGet(t, n.url+"/breaker")); got != "open" {
					t.Fatalf("breaker %s after 12 failed checks, want open", got)
				}
				switch fault {
				case "kill":
					srv.Restart()
					waitStore(t, l, c)
					exactly(t, l, "after-restart")
				case "sigstop":
					syscall.Kill(srv.PID(), syscall.SIGCONT)
					waitStore(t, l, c)
					// The state survived: 2 of 5 were spent before the stop.
					// The calls that timed out were in Redis's socket
					// buffers and may have run when it resumed (as for the
					// Go store, a call that times out may still be decided),
					// so at most 3 are left, never more.
					admitted := 0
					for range 5 {
						if timedCheck(t, l, c).Allowed {
							admitted++
						}
					}
					if admitted > 3 {
						t.Fatalf("after SIGCONT admitted %d of 5, want at most 3 (2 spent before)", admitted)
					}
					exactly(t, l, "after-sigcont")
				}
			})
		}
	}
}

func mustGet(t *testing.T, url string) string {
	t.Helper()
	resp, body := get(t, url)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return body
}

// TestBreakerCountsCallsInFlightTogetherOnce: requests whose Redis calls
// were in flight together in a worker and failed together (Redis stalled
// for a moment) count as one failure, as edge.Breaker counts them: a
// single stall does not open the breaker, however many requests it held;
// calls that fail one after another still do.
func TestBreakerCountsCallsInFlightTogetherOnce(t *testing.T) {
	srv := redistest.Standalone(t)
	loc := fmt.Sprintf(`
        location = /limited {
            access_by_lua_block {
                local lim = package.loaded.stall_limiter
                if not lim then
                    lim = assert(require("sluice").new{ redis = %q, timeout = %d, breaker = "sluice_breaker" })
                    package.loaded.stall_limiter = lim
                end
                lim:access{ zone = "stall", key = "k", limits = "1000r/h" }
            }
            content_by_lua_block { ngx.say("ok") }
        }
`, srv.URL(), failTimeout)
	n := startNginx(t, 1, harnessConf(t, breakerConf+loc))
	client := newHTTPClient()
	status := func() int {
		resp, err := client.Get(n.url + "/limited")
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(); got != http.StatusOK {
		t.Fatalf("healthy: %d", got)
	}
	pid := srv.PID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	const together = 20
	var wg sync.WaitGroup
	for range together {
		wg.Go(func() {
			if got := status(); got != http.StatusOK {
				t.Errorf("a request while Redis is stopped: %d, want 200 (policy open)", got)
			}
		})
	}
	wg.Wait()
	if got := strings.TrimSpace(mustGet(t, n.url+"/breaker")); got != "closed" {
		t.Fatalf("breaker %s after %d requests failed together, want closed (one failure)", got, together)
	}
	for range 5 {
		status()
	}
	if got := strings.TrimSpace(mustGet(t, n.url+"/breaker")); got != "open" {
		t.Fatalf("breaker %s after 5 more requests failed one after another, want open", got)
	}
}
