package openresty

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// asyncConf is a location deciding in the asynchronous mode, told that
// processes workers share each key, flushing every 50 ms.
func asyncConf(redisURL string, processes int) string {
	return fmt.Sprintf(`
        location = /async {
            access_by_lua_block {
                local sluice = require "sluice"
                local lim = package.loaded.async_limiter
                if not lim then
                    lim = assert(sluice.new{ redis = %q, timeout = 2000, async = true,
                        processes = %d, sync_interval = 50 })
                    package.loaded.async_limiter = lim
                end
                lim:access{ zone = "async", key = ngx.var.arg_key, limits = ngx.var.arg_limits }
            }
            content_by_lua_block { ngx.say("ok") }
        }
        location = /timers {
            content_by_lua_block { ngx.say(ngx.timer.running_count() + ngx.timer.pending_count()) }
        }
`, redisURL, processes)
}

// TestAsyncOverAdmissionBound measures the asynchronous mode's
// over-admission on a hot key: two nginx of two workers each (N = 4
// deciders, each told P = 4), 64 callers, one key of 1000 per hour. Stated
// bound: Rate <= admitted <= Rate + N·ceil(Rate/P) = 2000. Once the
// flushes are in, Redis holds at most Rate (a denied flush records what
// remains), and the local views agree with it: the key stays denied.
func TestAsyncOverAdmissionBound(t *testing.T) {
	const rate, n, p, callers, requests = 1000, 4, 4, 64, 4000
	srv := redistest.Standalone(t)
	fronts := []*nginx{
		startNginx(t, 2, harnessConf(t, asyncConf(srv.URL(), p))),
		startNginx(t, 2, harnessConf(t, asyncConf(srv.URL(), p))),
	}
	key := fmt.Sprintf("async-%d", time.Now().UnixNano())
	client := newHTTPClient()
	var admitted, denied, next atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for next.Add(1) <= requests {
				resp, err := client.Get(fronts[i%2].url + "/async?key=" + key + "&limits=1000r/h")
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
	// Checks in flight while the timers are counted: the flush timer of
	// each worker, never one per request.
	var timerWG sync.WaitGroup
	timerWG.Go(func() {
		for next.Load() < requests/2 {
			time.Sleep(time.Millisecond)
		}
		for _, f := range fronts {
			// The next tick pending, a round running, and a tick that
			// found it running and is returning: at most 3, whatever the
			// number of requests.
			if got := strings.TrimSpace(mustGet(t, f.url+"/timers")); got < "1" || got > "3" || len(got) != 1 {
				t.Errorf("a worker has %s timers under load, want 1 to 3 (its flush timer)", got)
			}
		}
	})
	wg.Wait()
	timerWG.Wait()
	got := admitted.Load()
	t.Logf("async: admitted %d of %d on a %d/h key (over-admission %d, %.1f%% of the rate; bound %d)",
		got, requests, rate, got-rate, 100*float64(got-rate)/rate, n*rate/p)
	if got < rate || got > rate+n*rate/p {
		t.Errorf("admitted %d, want between %d and %d", got, rate, rate+n*rate/p)
	}
	// The pending cost reaches Redis within a few intervals.
	s, err := redisstore.New(srv.Client(), redisstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	peek := sluice.Check{Hits: []sluice.Hit{{Zone: "async", Key: key, Limit: sluice.Limit{Rate: rate, Window: time.Hour}}}}
	deadline := time.Now().Add(10 * time.Second)
	var d sluice.Decision
	for {
		if err := s.Check(context.Background(), peek, &d); err != nil {
			t.Fatal(err)
		}
		if d.Hits[0].Used >= rate || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the flush timers run in nginx
	}
	if used := d.Hits[0].Used; used != rate {
		t.Errorf("Redis records %v on the key after the flushes, want exactly %d", used, rate)
	}
}
