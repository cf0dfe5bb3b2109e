package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// rawRequest sends one request to addr byte for byte as written (no client
// library cleans or re-encodes its target) and returns the response with
// its body read.
func rawRequest(t *testing.T, proxyURL, method, target, host string, headers ...string) (*http.Response, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(proxyURL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, host)
	for _, h := range headers {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, target, host, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

const matchConfig = `
listeners:
  - {addr: "127.0.0.1:0"}
  - {addr: "127.0.0.1:0", serve: proxy}
zones:
  - {name: tight, limits: 1r/m, key: "header:X-Client"}
proxy:
  upstream: %s
  rules:
    - {host: api.example.com, path_prefix: /api/, methods: [GET], zones: [tight]}
`

// TestProxyRuleCannotBeDodged performs an attack on a real
// proxy listener with a real upstream: each spelling of the limited
// resource is sent after one request by the same client has used up its
// quota, and must be denied (matched by the rule), never reach the
// upstream unlimited.
func TestProxyRuleCannotBeDodged(t *testing.T) {
	up := newUpstream(t)
	ts := start(t, parseConfig(t, fmt.Sprintf(matchConfig, up.URL)), Options{})
	for i, c := range []struct{ method, target, host string }{
		{"GET", "//api/x", "api.example.com"},
		{"GET", "///api//x", "api.example.com"},
		{"GET", "/./api/x", "api.example.com"},
		{"GET", "/foo/../api/x", "api.example.com"},
		{"GET", "/foo/bar/../../api/x", "api.example.com"},
		{"GET", "/../api/x", "api.example.com"},
		{"GET", "/%2e/api/x", "api.example.com"},
		{"GET", "/%2E%2E/api/x", "api.example.com"},
		{"GET", "/foo/%2e%2e/api/x", "api.example.com"},
		{"GET", "/api/./x", "api.example.com"},
		{"GET", "/api/x", "api.example.com."},
		{"GET", "/api/x", "API.Example.COM"},
		{"GET", "/api/x", "api.example.com.:80"},
		{"GET", "http://api.example.com./api/x", "api.example.com."},
		{"HEAD", "/api/x", "api.example.com"},
	} {
		client := fmt.Sprintf("X-Client: c%d", i)
		if resp, body := rawRequest(t, ts.proxy, "GET", "/api/x", "api.example.com", client); resp.StatusCode != http.StatusOK {
			t.Fatalf("first request of c%d: status %d (%s)", i, resp.StatusCode, body)
		}
		before := up.hits.Load()
		resp, body := rawRequest(t, ts.proxy, c.method, c.target, c.host, client)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s %s (Host %s): status %d, want 429: the rule must match (%s)", c.method, c.target, c.host, resp.StatusCode, body)
		}
		if got := up.hits.Load(); got != before {
			t.Errorf("%s %s (Host %s): reached the upstream", c.method, c.target, c.host)
		}
	}
}

// TestProxyForwardsWhatItMatched: the upstream gets the cleaned path the
// rule matched, and the normalised host in X-Forwarded-Host; a path whose
// decoded segments are not the upstream's is refused.
func TestProxyForwardsWhatItMatched(t *testing.T) {
	seen := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r.Method + " " + r.RequestURI + " " + r.Header.Get("X-Forwarded-Host"):
		default: // an unexpected request: the test fails on the count below
			seen <- "more than one"
		}
	}))
	t.Cleanup(up.Close)
	ts := start(t, parseConfig(t, fmt.Sprintf(matchConfig, up.URL)), Options{})
	for i, c := range []struct{ method, target, host, want string }{
		{"GET", "//api/x?q=1", "api.example.com", "GET /api/x?q=1 api.example.com"},
		{"GET", "/foo/../api/x/", "API.example.com.", "GET /api/x/ api.example.com"},
		{"GET", "/%2e/api/%2e%2e/api/y", "api.example.com.:8080", "GET /api/y api.example.com:8080"},
		{"HEAD", "/./api/x", "api.example.com", "HEAD /api/x api.example.com"},
		// Clean already: forwarded as sent, encoded slash and all.
		{"GET", "/api/a%2Fb", "api.example.com", "GET /api/a%2Fb api.example.com"},
		// Paths are case-sensitive: /API/ is not the rule's, goes to the
		// default upstream as sent.
		{"GET", "/API/x", "api.example.com", "GET /API/x api.example.com"},
	} {
		resp, body := rawRequest(t, ts.proxy, c.method, c.target, c.host, fmt.Sprintf("X-Client: f%d", i))
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s %s: status %d (%s)", c.method, c.target, resp.StatusCode, body)
			continue
		}
		if got := <-seen; got != c.want {
			t.Errorf("%s %s (Host %s): upstream saw %q, want %q", c.method, c.target, c.host, got, c.want)
		}
	}
	for _, target := range []string{"/x%2F..%2F..%2Fapi/x", "/x/%2f/../api/x", "//api%2fx", "/\\api/x", "/x\\..\\api/x"} {
		resp, body := rawRequest(t, ts.proxy, "GET", target, "api.example.com", "X-Client: r")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "slash") {
			t.Errorf("GET %s: status %d (%s), want 400", target, resp.StatusCode, body)
		}
	}
	if n := len(seen); n != 0 {
		t.Errorf("a refused request reached the upstream")
	}
}

func TestCleanPath(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", "/"},
		{"/", "/"},
		{"//", "/"},
		{"api/x", "/api/x"},
		{"/api/x/", "/api/x/"},
		{"/api/x//", "/api/x/"},
		{"/api/.", "/api"},
		{"/api/./", "/api/"},
		{"/a/b/../../../c", "/c"},
	} {
		if got := cleanPath(tt.in); got != tt.want {
			t.Errorf("cleanPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
