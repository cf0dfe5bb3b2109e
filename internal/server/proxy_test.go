package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// upstream is a real HTTP server that counts the requests it gets and
// echoes what the proxy sent.
type upstream struct {
	*httptest.Server
	hits atomic.Int64
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Upstream", "yes")
		fmt.Fprintf(w, "%s %s xff=%s body=%d", r.Method, r.URL.RequestURI(), r.Header.Get("X-Forwarded-For"), len(body))
	}))
	t.Cleanup(u.Close)
	return u
}

func proxyConfig(upstreamURL, headers string) string {
	return fmt.Sprintf(`
listeners:
  - {addr: "127.0.0.1:0"}
  - {addr: "127.0.0.1:0", serve: proxy, max_body_bytes: 1024}
trusted_proxies: [127.0.0.1]
zones:
  - {name: per-token, limits: 2r/m, key: "header:X-Api-Key"}
  - {name: per-ip, limits: 3r/m}
  - {name: per-host, limits: 1r/m, key: query:user}
proxy:
  upstream: %s
  headers: %s
  rules:
    - {host: "*.example.com", zones: [per-host]}
    - {path_prefix: /both, zones: [per-token, per-ip]}
    - {path_prefix: /api/, methods: [GET], zones: [per-token]}
    - {path_prefix: /free}
    - {path_prefix: /, zones: [per-ip]}
`, upstreamURL, headers)
}

func TestProxyAllowsThenDenies(t *testing.T) {
	up := newUpstream(t)
	ts := start(t, parseConfig(t, proxyConfig(up.URL, "always")), Options{})
	hdr := map[string]string{"X-Api-Key": "k1"}
	for i := range 2 {
		resp, raw := get(t, ts.proxy+"/api/items?x=1", hdr)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(raw), "GET /api/items?x=1 xff=127.0.0.1") {
			t.Fatalf("request %d: status %d, body %q; want the upstream's answer", i, resp.StatusCode, raw)
		}
		if got, want := resp.Header.Get("RateLimit"), fmt.Sprintf(`"2r/m";r=%d;t=`, 1-i); !strings.HasPrefix(got, want) {
			t.Errorf("request %d: RateLimit %q, want prefix %q", i, got, want)
		}
		if resp.Header.Get("X-Upstream") != "yes" {
			t.Errorf("request %d: the upstream's own headers are missing", i)
		}
	}
	resp, raw := get(t, ts.proxy+"/api/items", hdr)
	p := wantProblem(t, resp, raw, http.StatusTooManyRequests, "retry after")
	if got, want := resp.Header.Get("RateLimit-Policy"), `"2r/m";q=2;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	if got := resp.Header.Get("RateLimit"); !strings.HasPrefix(got, `"2r/m";r=0;t=`) {
		t.Errorf("RateLimit %q, want r=0", got)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q, want whole seconds >= 1", resp.Header.Get("Retry-After"))
	}
	if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "2r/m" || strings.Contains(string(raw), "k1") {
		t.Errorf("problem %s: want violated-policies [2r/m] and no key", raw)
	}
	if got := up.hits.Load(); got != 2 {
		t.Errorf("upstream got %d requests, want 2: the denied one must not reach it", got)
	}
	// Another token has its own quota.
	if resp, _ := get(t, ts.proxy+"/api/items", map[string]string{"X-Api-Key": "k2"}); resp.StatusCode != http.StatusOK {
		t.Errorf("second token: status %d, want 200", resp.StatusCode)
	}
}

func TestProxyRules(t *testing.T) {
	up := newUpstream(t)
	ts := start(t, parseConfig(t, proxyConfig(up.URL, "denied")), Options{})
	// A rule without zones is proxied unlimited, without RateLimit fields.
	for range 5 {
		resp, _ := get(t, ts.proxy+"/free/x", nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("/free: status %d, RateLimit %q; want 200 and none", resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
	// POST /api/ is not matched by the GET-only rule: it falls to per-ip,
	// keyed by X-Forwarded-For from the trusted loopback peer.
	for i := range 4 {
		req, _ := http.NewRequest(http.MethodPost, ts.proxy+"/api/x", strings.NewReader("hello"))
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := http.StatusOK
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Fatalf("POST %d: status %d, want %d (%s)", i, resp.StatusCode, want, raw)
		}
		if i == 0 && (resp.Header.Get("RateLimit") != "" || !strings.Contains(string(raw), "xff=203.0.113.9, 127.0.0.1 body=5")) {
			t.Errorf("POST: RateLimit %q, body %q; want no field (headers: denied) and the forwarded chain", resp.Header.Get("RateLimit"), raw)
		}
	}
	// A host rule: any subdomain of example.com, keyed by ?user=.
	h := map[string]string{"Host": "a.example.com"}
	if resp, _ := get(t, ts.proxy+"/x?user=u", h); resp.StatusCode != http.StatusOK {
		t.Errorf("host rule, first: status %d", resp.StatusCode)
	}
	if resp, _ := get(t, ts.proxy+"/x?user=u", h); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("host rule, second: status %d, want 429", resp.StatusCode)
	}
	resp, raw := get(t, ts.proxy+"/x", h)
	wantProblem(t, resp, raw, http.StatusBadRequest, "no key")
}

func TestProxyRuleOfTwoZones(t *testing.T) {
	up := newUpstream(t)
	ts := start(t, parseConfig(t, proxyConfig(up.URL, "always")), Options{})
	resp, raw := get(t, ts.proxy+"/both", map[string]string{"X-Api-Key": "k"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d (%s)", resp.StatusCode, raw)
	}
	if got, want := resp.Header.Get("RateLimit-Policy"), `"2r/m";q=2;w=60, "3r/m";q=3;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	if got := resp.Header.Get("RateLimit"); !strings.HasPrefix(got, `"2r/m";r=1;t=`) || !strings.Contains(got, `, "3r/m";r=2;t=`) {
		t.Errorf("RateLimit %q, want both zones' items", got)
	}
}

func TestProxyErrors(t *testing.T) {
	up := newUpstream(t)
	up.Close() // nothing listens there any more
	ts := start(t, parseConfig(t, proxyConfig(up.URL, "always")), Options{})
	resp, raw := get(t, ts.proxy+"/free", nil)
	wantProblem(t, resp, raw, http.StatusBadGateway, "upstream")
	if got := metricValue(t, ts.api, "sluice_proxy_upstream_errors_total"); got != 1 {
		t.Errorf("upstream errors metric %v, want 1", got)
	}
}

func TestProxyBodyLimit(t *testing.T) {
	up := newUpstream(t)
	ts := start(t, parseConfig(t, proxyConfig(up.URL, "always")), Options{})
	resp, err := client.Post(ts.proxy+"/free", "text/plain", strings.NewReader(strings.Repeat("x", 2048)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantProblem(t, resp, raw, http.StatusRequestEntityTooLarge, "larger than 1024 bytes")
}

func TestHostMatches(t *testing.T) {
	for _, tt := range []struct {
		pattern, host string
		want          bool
	}{
		{"api.example.com", "api.example.com", true},
		{"api.example.com", "x.api.example.com", false},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "badexample.com", false},
	} {
		if got := hostMatches(tt.pattern, tt.host); got != tt.want {
			t.Errorf("hostMatches(%q, %q) = %v, want %v", tt.pattern, tt.host, got, tt.want)
		}
	}
}
