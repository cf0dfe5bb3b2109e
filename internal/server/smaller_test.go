package server

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Smaller hardening tests, against a real server.

// TestPolicyIDsUniquePerResponse: /v1/auth?zone=a&zone=b, and a proxy
// rule over both, with equal limits name two distinct policies.
func TestPolicyIDsUniquePerResponse(t *testing.T) {
	up := newUpstream(t)
	ts := start(t, parseConfig(t, fmt.Sprintf(`
listeners:
  - {addr: "127.0.0.1:0", serve: api}
  - {addr: "127.0.0.1:0", serve: proxy}
zones:
  - {name: a, limits: 10r/m}
  - {name: b, limits: 10r/m}
proxy:
  upstream: %s
  rules: [{zones: [a, b]}]
`, up.URL)), Options{})
	const policy = `"a/10r/m";q=10;w=60, "b/10r/m";q=10;w=60`
	for _, url := range []string{ts.api + "/v1/auth?zone=a&zone=b", ts.api + "/v1/auth?zone=a,b", ts.proxy + "/x"} {
		resp, raw := get(t, url, nil)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s: %d %s", url, resp.StatusCode, raw)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != policy {
			t.Errorf("%s: RateLimit-Policy %s, want %s", url, got, policy)
		}
		if got := resp.Header.Get("RateLimit"); !strings.HasPrefix(got, `"a/10r/m";r=`) || !strings.Contains(got, `, "b/10r/m";r=`) {
			t.Errorf("%s: RateLimit %s, want the items of %s", url, got, policy)
		}
	}
}

// TestUnknownZoneNotListed: a 404 for an unknown zone does not tell any
// caller the names of the configured zones.
func TestUnknownZoneNotListed(t *testing.T) {
	ts := start(t, parseConfig(t, "listeners: [{addr: '127.0.0.1:0'}]\nzones: [{name: internal-billing, limits: 1r/s}]\n"), Options{})
	resp, raw := post(t, ts.api+"/v1/check", `{"zone":"nope","key":"k"}`)
	wantProblem(t, resp, raw, http.StatusNotFound, `no zone named "nope" is configured`)
	resp2, raw2 := get(t, ts.api+"/v1/auth?zone=nope", nil)
	wantProblem(t, resp2, raw2, http.StatusNotFound, `no zone named "nope" is configured`)
	for _, body := range [][]byte{raw, raw2} {
		if strings.Contains(string(body), "internal-billing") {
			t.Errorf("the 404 names a configured zone: %s", body)
		}
	}
}

// TestDetailsWithoutPackageNames: error details say what is wrong with the
// request, without Go package and operation names or hit indexes.
func TestDetailsWithoutPackageNames(t *testing.T) {
	ts := start(t, parseConfig(t, "listeners: [{addr: '127.0.0.1:0'}]\nzones:\n  - {name: a, limits: 3r/m}\n  - {name: keyed, limits: 3r/m, key: header:X-Api-Key}\n"), Options{})
	for _, tt := range []struct{ body, detail string }{
		{`{"zone":"a","key":"k","cost":100}`, `cost 100 is greater than the rate of limit "3r/m" and could never pass`},
		{`{"zone":"a","key":"k","cost":-1}`, "cost must be >= 0, got -1"},
	} {
		resp, raw := post(t, ts.api+"/v1/check", tt.body)
		if p := wantProblem(t, resp, raw, http.StatusBadRequest, tt.detail); p.Detail != tt.detail {
			t.Errorf("%s: detail %q, want exactly %q", tt.body, p.Detail, tt.detail)
		}
	}
	resp, raw := get(t, ts.api+"/v1/auth?zone=keyed", nil)
	p := wantProblem(t, resp, raw, http.StatusUnauthorized, "X-Api-Key")
	for _, internal := range []string{"httplimit", "memstore", "hit 0", "sluice:"} {
		if strings.Contains(p.Detail, internal) {
			t.Errorf("detail %q names %q", p.Detail, internal)
		}
	}
}

func TestPublicDetail(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`zone "k": httplimit: no X-Api-Key header: httplimit: no key in request`, `zone "k": no X-Api-Key header: no key in request`},
		{`redisstore: check: dial tcp 10.0.0.1:6379: connection refused`, `dial tcp 10.0.0.1:6379: connection refused`},
		{`hit x: check`, `hit x`},
	} {
		if got := publicDetail(fmt.Errorf("%s", tt.in)); got != tt.want {
			t.Errorf("publicDetail(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Invalid input is read from the typed error, not cut out of its text.
	c := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: sluice.Limit{Rate: 3, Window: time.Minute}}}, Cost: 5}
	err := fmt.Errorf("memstore: check: %w", c.Validate())
	if got, want := publicDetail(err), `cost 5 is greater than the rate of limit "3r/m" and could never pass`; got != want {
		t.Errorf("publicDetail(%q) = %q, want %q", err, got, want)
	}
}

// TestUpstreamErrorLogThrottled: an upstream that is down writes one log
// line per interval, not one per request; every error is still counted.
func TestUpstreamErrorLogThrottled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	ts := start(t, parseConfig(t, fmt.Sprintf(`
listeners:
  - {addr: "127.0.0.1:0", serve: api}
  - {addr: "127.0.0.1:0", serve: proxy}
zones: [{name: a, limits: 1000r/s}]
proxy:
  upstream: %s
  rules: [{zones: [a]}]
`, down)), Options{})
	const n = 20
	for i := range n {
		if resp, raw := get(t, ts.proxy+"/x", nil); resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("request %d: %d %s, want 502", i, resp.StatusCode, raw)
		}
	}
	if got := strings.Count(ts.logs.String(), `msg="upstream error"`); got != 1 {
		t.Errorf("%d upstream error lines for %d errors within the interval, want 1:\n%s", got, n, ts.logs)
	}
	if got := metricValue(t, ts.api, "sluice_proxy_upstream_errors_total"); got != n {
		t.Errorf("sluice_proxy_upstream_errors_total = %v, want %d", got, n)
	}
}

func TestThrottle(t *testing.T) {
	now := time.Unix(1000, 0)
	th := throttle{every: 10 * time.Second, now: func() time.Time { return now }}
	steps := []struct {
		advance    time.Duration
		ok         bool
		suppressed int64
	}{
		{0, true, 0}, {time.Second, false, 0}, {time.Second, false, 0},
		{8 * time.Second, true, 2}, {9 * time.Second, false, 0}, {time.Second, true, 1},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if ok, suppressed := th.allow(); ok != s.ok || suppressed != s.suppressed {
			t.Errorf("step %d: allow() = %v, %d; want %v, %d", i, ok, suppressed, s.ok, s.suppressed)
		}
	}
}
