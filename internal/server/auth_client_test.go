package server

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestAuthClientAddress performs an attack on a real
// server's /v1/auth: a front proxy that sends only X-Forwarded-For
// (Traefik's ForwardAuth, Caddy's forward_auth) gets one bucket per
// client, not one for all; X-Real-IP with a port is the client; and a
// request whose X-Real-IP and X-Forwarded-For disagree (one of them came
// from the client) gets no key rather than the key it chose.
func TestAuthClientAddress(t *testing.T) {
	ts := start(t, parseConfig(t, authConfig), Options{})
	auth := func(h map[string]string) int {
		resp, _ := get(t, ts.api+"/v1/auth?zone=per-ip", h)
		return resp.StatusCode
	}
	// Traefik/Caddy: X-Forwarded-For only, the client appended last.
	for _, client := range []string{"198.51.100.1", "198.51.100.2"} {
		xff := map[string]string{"X-Forwarded-For": "6.6.6.6, " + client}
		for i, want := range []int{204, 204, 403} {
			if got := auth(xff); got != want {
				t.Errorf("X-Forwarded-For ..., %s: request %d: status %d, want %d", client, i, got, want)
			}
		}
	}
	// nginx: X-Real-IP, with a port or not, is one client.
	for i, realIP := range []string{"198.51.100.3:80", "198.51.100.3", "198.51.100.3:1234"} {
		want := []int{204, 204, 403}[i]
		if got := auth(map[string]string{"X-Real-IP": realIP}); got != want {
			t.Errorf("X-Real-IP %s: status %d, want %d", realIP, got, want)
		}
	}
	// nginx as examples/nginx.conf sets it: both, agreeing.
	both := map[string]string{"X-Real-IP": "198.51.100.4", "X-Forwarded-For": "6.6.6.6, 198.51.100.4"}
	if got := auth(both); got != 204 {
		t.Errorf("agreeing X-Real-IP and X-Forwarded-For: status %d, want 204", got)
	}
	// A client's own X-Forwarded-For passed on beside nginx's X-Real-IP,
	// or a client's own X-Real-IP beside a proxy's X-Forwarded-For.
	for _, h := range []map[string]string{
		{"X-Real-IP": "198.51.100.5", "X-Forwarded-For": "6.6.6.6"},
		{"X-Real-IP": "6.6.6.6", "X-Forwarded-For": "198.51.100.5"},
		{"X-Real-IP": "not an address"},
	} {
		resp, raw := get(t, ts.api+"/v1/auth?zone=per-ip", h)
		wantProblem(t, resp, raw, http.StatusUnauthorized, "X-Real-IP")
	}
}

// TestOriginalRequestClient: the client address /v1/auth keys on, for
// trusted and untrusted peers, and the zones see no forwarding header.
func TestOriginalRequestClient(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		peer, xff, realIP, want string
	}{
		{"127.0.0.1:5000", "198.51.100.7", "", "198.51.100.7"},
		{"10.1.2.3:5000", "198.51.100.7, 10.9.9.9", "", "198.51.100.7"},
		{"127.0.0.1:5000", "198.51.100.7, 127.0.0.1", "", "198.51.100.7"}, // the peer itself is skipped
		{"203.0.113.50:5000", "198.51.100.7", "198.51.100.7", "203.0.113.50"},
		{"10.1.2.3:5000", "", "[2001:db8::7]:443", "2001:db8::7"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/auth?zone=z", nil)
		r.RemoteAddr = tc.peer
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if tc.realIP != "" {
			r.Header.Set("X-Real-IP", tc.realIP)
		}
		orig, err := originalRequest(r, trusted)
		if err != nil {
			t.Fatalf("peer %s, X-Forwarded-For %q: %v", tc.peer, tc.xff, err)
		}
		host, _, _ := net.SplitHostPort(orig.RemoteAddr)
		if host != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q, X-Real-IP %q: client %s, want %s", tc.peer, tc.xff, tc.realIP, host, tc.want)
		}
		if orig.Header.Get("X-Forwarded-For") != "" || orig.Header.Get("X-Real-IP") != "" {
			t.Errorf("peer %s: the zones still see forwarding headers", tc.peer)
		}
	}
}
