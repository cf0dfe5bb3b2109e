package server

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

const authConfig = `
listeners: [{addr: "127.0.0.1:0"}]
zones:
  - {name: per-ip, limits: 2r/m}
  - {name: per-token, limits: 1r/m, key: query:token}
  - {name: per-session, limits: 5r/m, key: cookie:session}
`

func TestAuthRequest(t *testing.T) {
	ts := start(t, parseConfig(t, authConfig), Options{})
	nginx := map[string]string{"X-Real-IP": "198.51.100.7", "X-Original-URI": "/login?token=t1", "X-Original-Method": "POST"}
	for i := range 2 {
		resp, raw := get(t, ts.api+"/v1/auth?zone=per-ip", nginx)
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("request %d: status %d, want 204 (%s)", i, resp.StatusCode, raw)
		}
		if got := resp.Header.Get("RateLimit"); !strings.HasPrefix(got, `"2r/m";r=`+strconv.Itoa(1-i)) {
			t.Errorf("request %d: RateLimit %q", i, got)
		}
	}
	resp, raw := get(t, ts.api+"/v1/auth?zone=per-ip", nginx)
	wantProblem(t, resp, raw, http.StatusForbidden, "retry after")
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("Retry-After %q, want whole seconds >= 1", resp.Header.Get("Retry-After"))
	}
	// Another client address has its own quota; deny_status serves
	// proxies that pass any status on.
	other := map[string]string{"X-Real-IP": "2001:db8::1"}
	for i, want := range []int{http.StatusNoContent, http.StatusNoContent, http.StatusTooManyRequests} {
		if resp, raw := get(t, ts.api+"/v1/auth?zone=per-ip&deny_status=429", other); resp.StatusCode != want {
			t.Errorf("IPv6 client, request %d: status %d, want %d (%s)", i, resp.StatusCode, want, raw)
		}
	}
}

func TestAuthKeysFromOriginalRequest(t *testing.T) {
	ts := start(t, parseConfig(t, authConfig), Options{})
	nginx := map[string]string{"X-Original-URI": "/api?token=t1", "Cookie": "session=s1"}
	// Two zones at once, all or nothing: per-token denies the second
	// request, and per-session is not charged for it.
	if resp, raw := get(t, ts.api+"/v1/auth?zone=per-token&zone=per-session", nginx); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("first: status %d (%s)", resp.StatusCode, raw)
	}
	resp, raw := get(t, ts.api+"/v1/auth?zone=per-token,per-session", nginx)
	p := wantProblem(t, resp, raw, http.StatusForbidden, "")
	if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "1r/m" {
		t.Errorf("violated-policies %v, want [1r/m]", p.ViolatedPolicies)
	}
	if got := resp.Header.Get("RateLimit"); !strings.Contains(got, `"5r/m";r=4`) {
		t.Errorf("RateLimit %q: per-session should have 4 left, the denied check recording nothing", got)
	}
	// Another token passes.
	nginx["X-Original-URI"] = "/api?token=t2"
	if resp, raw := get(t, ts.api+"/v1/auth?zone=per-token", nginx); resp.StatusCode != http.StatusNoContent {
		t.Errorf("token t2: status %d (%s)", resp.StatusCode, raw)
	}
}

func TestAuthErrors(t *testing.T) {
	ts := start(t, parseConfig(t, authConfig), Options{})
	for _, tt := range []struct {
		name, query string
		headers     map[string]string
		status      int
		detail      string
	}{
		{"no zone", "", nil, 400, "missing ?zone=NAME"},
		{"unknown zone", "?zone=per-ip,nope", nil, 404, `no zone named "nope"`},
		{"no key", "?zone=per-token", map[string]string{"X-Original-URI": "/api"}, 401, "no key"},
		{"bad uri", "?zone=per-token", map[string]string{"X-Original-URI": "::"}, 400, "is not a request URI"},
		{"bad deny status", "?zone=per-ip&deny_status=200", nil, 400, "not a 4xx status"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, raw := get(t, ts.api+"/v1/auth"+tt.query, tt.headers)
			wantProblem(t, resp, raw, tt.status, tt.detail)
		})
	}
}

// TestOriginalRequestTrustsOnlyKnownPeers: X-Real-IP picks the key only when
// nginx (a loopback peer or a trusted proxy) sent it; anyone else is keyed
// by their own address, whatever header they send.
func TestOriginalRequestTrustsOnlyKnownPeers(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		peer, want string
	}{
		{"127.0.0.1:5000", "198.51.100.7"},
		{"[::1]:5000", "198.51.100.7"},
		{"10.1.2.3:5000", "198.51.100.7"},
		{"203.0.113.50:5000", "203.0.113.50"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/auth?zone=z", nil)
		r.RemoteAddr = tc.peer
		r.Header.Set("X-Real-IP", "198.51.100.7")
		orig, err := originalRequest(r, trusted)
		if err != nil {
			t.Fatal(err)
		}
		host, _, _ := net.SplitHostPort(orig.RemoteAddr)
		if host != tc.want {
			t.Errorf("peer %s: client %s, want %s", tc.peer, host, tc.want)
		}
	}
}
