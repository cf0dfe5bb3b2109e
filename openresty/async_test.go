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
	return asyncConfOpts(redisURL, processes, "")
}

// asyncConfOpts is asyncConf with more options of sluice.new (Lua, each
// followed by a comma).
func asyncConfOpts(redisURL string, processes int, extra string) string {
	return fmt.Sprintf(`
        location = /async {
            access_by_lua_block {
                local sluice = require "sluice"
                local lim = package.loaded.async_limiter
                if not lim then
                    lim = assert(sluice.new{ redis = %q, timeout = 2000, async = true,
                        processes = %d, sync_interval = 50, %s })
                    package.loaded.async_limiter = lim
                end
                lim:access{ zone = "async", key = ngx.var.arg_key, limits = ngx.var.arg_limits }
            }
            content_by_lua_block { ngx.say("ok") }
        }
        location = /timers {
            content_by_lua_block { ngx.say(ngx.timer.running_count() + ngx.timer.pending_count()) }
        }
`, redisURL, processes, extra)
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

// TestAsyncFirstSightBound: with first_sight, a key without a view is
// admitted in the worker up to first_sight while its cost goes to Redis
// with the next flush. Two nginx of two workers (N = 4), first_sight 2, 20
// keys of 5 per hour, half of them already full in Redis (filled by the Go
// store): a full key admits at most N·first_sight = 8 (and at least one:
// first sight is on), a new key its limit and at most limit + 8; once the
// flushes are in, Redis holds exactly the limit on every key.
func TestAsyncFirstSightBound(t *testing.T) {
	const rate, n, first, keys, perKey = 5, 4, 2, 20, 40
	srv := redistest.Standalone(t)
	conf := harnessConf(t, asyncConfOpts(srv.URL(), n, fmt.Sprintf("first_sight = %d,", first)))
	fronts := []*nginx{startNginx(t, 2, conf), startNginx(t, 2, conf)}
	s, err := redisstore.New(srv.Client(), redisstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prefix := fmt.Sprintf("fs-%d-", time.Now().UnixNano())
	limit := sluice.Limit{Rate: rate, Window: time.Hour}
	check := func(k int, cost int64) sluice.Check {
		return sluice.Check{Hits: []sluice.Hit{{Zone: "async", Key: fmt.Sprint(prefix, k), Limit: limit}}, Cost: cost}
	}
	full := func(k int) bool { return k%2 == 0 }
	for k := range keys {
		if full(k) {
			var d sluice.Decision
			if err := s.Check(context.Background(), check(k, rate), &d); err != nil || !d.Allowed {
				t.Fatalf("filling key %d: %v, allowed %v", k, err, d.Allowed)
			}
		}
	}
	client := newHTTPClient()
	admitted := make([]atomic.Int64, keys)
	var wg sync.WaitGroup
	for k := range keys {
		wg.Go(func() {
			for i := range perKey {
				resp, err := client.Get(fmt.Sprintf("%s/async?key=%s%d&limits=5r/h", fronts[i%2].url, prefix, k))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					admitted[k].Add(1)
				case http.StatusTooManyRequests:
				default:
					t.Errorf("nginx answered %s", resp.Status)
				}
				// Pacing, not waiting for a state: a key's checks span
				// several flush intervals, as a client's would.
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	var overFull, overNew int64
	for k := range keys {
		got := admitted[k].Load()
		if full(k) {
			overFull += got
			if got > n*first {
				t.Errorf("full key %d: admitted %d, want at most N·first_sight = %d", k, got, n*first)
			}
		} else {
			overNew += got - rate
			if got < rate || got > rate+n*first {
				t.Errorf("new key %d: admitted %d, want %d to %d", k, got, rate, rate+n*first)
			}
		}
	}
	t.Logf("first sight: %d admitted on %d full keys, %d over the limit on %d new keys (bound N·first_sight = %d per key)",
		overFull, keys/2, overNew, keys/2, n*first)
	if overFull == 0 {
		t.Errorf("no first-sight admission on the full keys")
	}
	deadline := time.Now().Add(10 * time.Second)
	for k := range keys {
		for {
			var d sluice.Decision
			if err := s.Check(context.Background(), check(k, 0), &d); err != nil {
				t.Fatal(err)
			}
			used := d.Hits[0].Used
			if used > rate {
				t.Fatalf("key %d: Redis records %v, more than the limit", k, used)
			}
			if used == rate {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("key %d: Redis records %v after the flushes, want %d", k, used, rate)
			}
			time.Sleep(20 * time.Millisecond) // the flush timers run in nginx
		}
	}
}

// TestAsyncDropsOnlyCostOlderThanWindow: while Redis is down, a worker's
// flushes fail and its pending cost stays owed, but for what was admitted
// more than a window ago: one unit admitted on first sight, then one more
// a window later; when Redis is back it records exactly the recent one.
func TestAsyncDropsOnlyCostOlderThanWindow(t *testing.T) {
	srv := redistest.Standalone(t)
	front := startNginx(t, 1, harnessConf(t, asyncConfOpts(srv.URL(), 1, "first_sight = 3, timeout = 100,")))
	key := fmt.Sprintf("drop-%d", time.Now().UnixNano())
	url := front.url + "/async?key=" + key + "&limits=100r/2s"
	srv.Kill()
	if got := mustStatus(t, url); got != http.StatusOK {
		t.Fatalf("first sight with Redis down: %d, want 200", got)
	}
	time.Sleep(2500 * time.Millisecond) // the window (2 s) passes; the flushes fail meanwhile
	if got := mustStatus(t, url); got != http.StatusOK {
		t.Fatalf("second check on the first-sight view: %d, want 200", got)
	}
	srv.Restart()
	s, err := redisstore.New(srv.Client(), redisstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	peek := sluice.Check{Hits: []sluice.Hit{{Zone: "async", Key: key, Limit: sluice.Limit{Rate: 100, Window: 2 * time.Second}}}}
	deadline := time.Now().Add(5 * time.Second)
	var used float64
	for used == 0 && time.Now().Before(deadline) {
		var d sluice.Decision
		if err := s.Check(context.Background(), peek, &d); err != nil {
			t.Fatal(err)
		}
		used = d.Hits[0].Used
		time.Sleep(10 * time.Millisecond) // the flush timer runs in nginx
	}
	// Read within moments of the flush, one unit weighs about 1 in the
	// sliding window, two about 2.
	if used < 0.5 || used > 1.5 {
		t.Errorf("Redis records %v after it came back, want 1: the unit older than the window dropped, the recent one kept", used)
	}
}

func mustStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := newHTTPClient().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAsyncFirstSightRecords: a first sight's cost goes to Redis with
// record.lua (one integer per record) and a table of first sights that is
// full forgets only entries whose records are in Redis. One worker,
// first_sight 1, async_max_keys 2, keys of 5 per hour: a new key's unit is
// recorded; a key already full in Redis is admitted once on first sight,
// counted unrecorded, and denied by the store on its next check; a third
// key, once the first two are recorded, evicts one of them.
func TestAsyncFirstSightRecords(t *testing.T) {
	srv := redistest.Standalone(t)
	stats := `
        location = /stats {
            content_by_lua_block {
                local st = package.loaded.async_limiter.edge.async.stats
                ngx.say(st.first_sight, " ", st.flushed, " ", st.unrecorded, " ", st.evicted)
            }
        }
`
	front := startNginx(t, 1, harnessConf(t, asyncConfOpts(srv.URL(), 1, "first_sight = 1, async_max_keys = 2,")+stats))
	s, err := redisstore.New(srv.Client(), redisstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prefix := fmt.Sprintf("rec-%d-", time.Now().UnixNano())
	limit := sluice.Limit{Rate: 5, Window: time.Hour}
	check := func(key string, cost int64) sluice.Check {
		return sluice.Check{Hits: []sluice.Hit{{Zone: "async", Key: prefix + key, Limit: limit}}, Cost: cost}
	}
	var d sluice.Decision
	if err := s.Check(context.Background(), check("full", 5), &d); err != nil || !d.Allowed {
		t.Fatalf("filling the full key: %v, allowed %v", err, d.Allowed)
	}
	url := func(key string) string { return front.url + "/async?limits=5r/h&key=" + prefix + key }
	readStats := func() (first, flushed, unrecorded, evicted int) {
		resp, err := newHTTPClient().Get(front.url + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := fmt.Fscan(resp.Body, &first, &flushed, &unrecorded, &evicted); err != nil {
			t.Fatal(err)
		}
		return
	}
	// until polls the worker's stats: its flush timer runs in nginx.
	until := func(what string, ok func(first, flushed, unrecorded, evicted int) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			f, fl, u, e := readStats()
			if ok(f, fl, u, e) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: stats first_sight %d, flushed %d, unrecorded %d, evicted %d", what, f, fl, u, e)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, k := range []string{"new", "full"} {
		if got := mustStatus(t, url(k)); got != http.StatusOK {
			t.Fatalf("first sight of %s: %d, want 200", k, got)
		}
	}
	until("the two records sent", func(f, fl, u, e int) bool { return f == 2 && fl == 1 && u == 1 })
	for k, want := range map[string]float64{"new": 1, "full": 5} {
		var d sluice.Decision
		if err := s.Check(context.Background(), check(k, 0), &d); err != nil {
			t.Fatal(err)
		}
		if d.Hits[0].Used != want {
			t.Errorf("key %s: Redis records %v, want %v", k, d.Hits[0].Used, want)
		}
	}
	if got := mustStatus(t, url("full")); got != http.StatusTooManyRequests {
		t.Errorf("the full key's second check: %d, want 429 (its first-sight budget spent, the store decides)", got)
	}
	if got := mustStatus(t, url("third")); got != http.StatusOK {
		t.Fatalf("first sight of a third key: %d, want 200", got)
	}
	until("the third key's record", func(f, fl, u, e int) bool { return f == 3 && fl == 2 && e == 1 })
}

// asyncStatsConf is asyncConfOpts with /stats, which prints the number
// of views (tables) the worker holds, the number of entries of any kind
// in its tables of views, then its async counters named in the query
// (?names=local,sync).
func asyncStatsConf(t *testing.T, redisURL, extra string) func(string) string {
	return asyncStatsConfP(t, redisURL, 1, extra)
}

// asyncStatsConfP is asyncStatsConf told that processes workers share
// each key.
func asyncStatsConfP(t *testing.T, redisURL string, processes int, extra string) func(string) string {
	stats := `
        location = /stats {
            content_by_lua_block {
                local a = package.loaded.async_limiter.edge.async
                local views, entries = 0, 0
                for _, gen in ipairs({ a.views, a.old }) do
                    for _, v in pairs(gen) do
                        entries = entries + 1
                        if type(v) == "table" then views = views + 1 end
                    end
                end
                local out = { views, entries }
                for name in ngx.var.arg_names:gmatch("[^,]+") do out[#out + 1] = a.stats[name] end
                ngx.say(table.concat(out, " "))
            }
        }
`
	return harnessConf(t, asyncConfOpts(redisURL, processes, extra)+stats)
}

func readInts(t *testing.T, url string, n int) []int {
	t.Helper()
	resp, err := newHTTPClient().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := make([]int, n)
	for i := range out {
		if _, err := fmt.Fscan(resp.Body, &out[i]); err != nil {
			t.Fatalf("reading %s: %v", url, err)
		}
	}
	return out
}

// TestAsyncViewFromFifthSight: a key seen up to four times costs no view
// and holds nothing in the worker's tables (not even its identity
// string); its fifth check, decided by Redis, makes a view, and its sixth
// is decided from it. One worker, 30 keys of 100 per hour, each checked
// six times in turn.
func TestAsyncViewFromFifthSight(t *testing.T) {
	const sights = 5 // async.lua's SIGHTS
	srv := redistest.Standalone(t)
	front := startNginx(t, 1, asyncStatsConf(t, srv.URL(), ""))
	prefix := fmt.Sprintf("seen-%d-", time.Now().UnixNano())
	const keys = 30
	stats := front.url + "/stats?names=local,sync"
	for round := 1; round <= sights+1; round++ {
		for k := range keys {
			if got := mustStatus(t, fmt.Sprintf("%s/async?limits=100r/h&key=%s%d", front.url, prefix, k)); got != http.StatusOK {
				t.Fatalf("round %d, key %d: %d, want 200", round, k, got)
			}
		}
		// views, entries, local, sync
		want := [4]int{0, 0, 0, round * keys}
		switch {
		case round == sights:
			want = [4]int{keys, keys, 0, sights * keys}
		case round > sights:
			want = [4]int{keys, keys, (round - sights) * keys, sights * keys}
		}
		if got := readInts(t, stats, 4); [4]int(got) != want {
			t.Errorf("after round %d: views, entries, local, sync = %v, want %v", round, got, want)
		}
	}
}

// TestAsyncDeniedKeyWaitsForRetryAfter: a key denied in the worker asks
// Redis again only once the store's RetryAfter has passed, not every
// interval: a key of 5 per hour, filled, then checked 60 times over more
// than 20 flush intervals, is denied every time in the worker (its
// RetryAfter is minutes away), and Redis holds exactly 5.
func TestAsyncDeniedKeyWaitsForRetryAfter(t *testing.T) {
	srv := redistest.Standalone(t)
	front := startNginx(t, 1, asyncStatsConf(t, srv.URL(), ""))
	key := fmt.Sprintf("denied-%d", time.Now().UnixNano())
	url := front.url + "/async?limits=5r/h&key=" + key
	admitted, filled := 0, 0
	for i := range 70 {
		switch got := mustStatus(t, url); got {
		case http.StatusOK:
			admitted++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("check %d: %d", i, got)
		}
		if i == 9 {
			filled = readInts(t, front.url+"/stats?names=sync", 3)[2]
		}
		if i >= 10 {
			// Pacing, not waiting for a state: the denials span many
			// flush intervals (50 ms), each of which used to refresh.
			time.Sleep(20 * time.Millisecond)
		}
	}
	if admitted != 5 {
		t.Errorf("admitted %d, want 5", admitted)
	}
	if asked := readInts(t, front.url+"/stats?names=sync", 3)[2] - filled; asked != 0 {
		t.Errorf("%d checks asked Redis once the key was denied, its RetryAfter minutes away; want 0", asked)
	}
	s, err := redisstore.New(srv.Client(), redisstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var d sluice.Decision
	peek := sluice.Check{Hits: []sluice.Hit{{Zone: "async", Key: key, Limit: sluice.Limit{Rate: 5, Window: time.Hour}}}}
	if err := s.Check(context.Background(), peek, &d); err != nil {
		t.Fatal(err)
	}
	if d.Hits[0].Used != 5 {
		t.Errorf("Redis records %v, want 5", d.Hits[0].Used)
	}
}

// TestAsyncShareRoundsDown: a worker's share of what remained is rounded
// down, so that the shares of the processes sharing a key add up to at
// most what remained; a check that does not fit is asked of Redis. One
// worker told that 2 share each key (processes = 2), a key of 6 per hour:
// its first five checks go to Redis (its fifth sight makes the view, 1
// remaining), then another decider takes that unit in Redis. The worker's
// sixth check must be denied by Redis; with the share rounded up (1 of 1)
// it would be admitted here, as by every worker each time a unit frees on
// a key held at its limit.
func TestAsyncShareRoundsDown(t *testing.T) {
	srv := redistest.Standalone(t)
	front := startNginx(t, 1, asyncStatsConfP(t, srv.URL(), 2, ""))
	key := fmt.Sprintf("share-%d", time.Now().UnixNano())
	url := front.url + "/async?limits=6r/h&key=" + key
	for i := range 5 {
		if got := mustStatus(t, url); got != http.StatusOK {
			t.Fatalf("check %d: %d, want 200", i+1, got)
		}
	}
	if got := readInts(t, front.url+"/stats?names=sync,local", 4); got[0] != 1 || got[2] != 5 || got[3] != 0 {
		t.Fatalf("views, entries, sync, local decisions: %v, want a view and 5 checks asked of Redis", got)
	}
	s, err := redisstore.New(srv.Client(), redisstore.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var d sluice.Decision
	other := sluice.Check{Cost: 1, Hits: []sluice.Hit{{Zone: "async", Key: key, Limit: sluice.Limit{Rate: 6, Window: time.Hour}}}}
	if err := s.Check(context.Background(), other, &d); err != nil || !d.Allowed {
		t.Fatalf("the other decider's check: %+v, %v", d, err)
	}
	if got := mustStatus(t, url); got != http.StatusTooManyRequests {
		t.Errorf("the sixth check: %d, want 429 (Redis has no unit left)", got)
	}
	if got := readInts(t, front.url+"/stats?names=sync,local", 4); got[2] != 6 || got[3] != 0 {
		t.Errorf("sync, local decisions: %d, %d; want the sixth asked of Redis (6, 0)", got[2], got[3])
	}
	other.Cost = 0
	if err := s.Check(context.Background(), other, &d); err != nil {
		t.Fatal(err)
	}
	if d.Hits[0].Used != 6 {
		t.Errorf("Redis records %v, want 6", d.Hits[0].Used)
	}
}
