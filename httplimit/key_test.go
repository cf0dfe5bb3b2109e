package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
)

func mustPrefixes(t *testing.T, list ...string) []netip.Prefix {
	t.Helper()
	p, err := httplimit.ParseTrustedProxies(list)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClientAddr(t *testing.T) {
	trusted := mustPrefixes(t, "10.0.0.0/8", "fd00::/8", "192.0.2.7")
	tests := []struct {
		name    string
		trusted bool // use the trusted list
		remote  string
		xff     []string
		realIP  string
		want    string
		wantErr bool
	}{
		{name: "peer without proxies", remote: "198.51.100.1:4000", want: "198.51.100.1"},
		{name: "spoofed header ignored without proxies", remote: "198.51.100.1:4000", xff: []string{"203.0.113.9"}, want: "198.51.100.1"},
		{name: "untrusted peer ignores header", trusted: true, remote: "198.51.100.1:4000", xff: []string{"203.0.113.9"}, want: "198.51.100.1"},
		{name: "one trusted proxy", trusted: true, remote: "10.1.2.3:80", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "client-sent entry left of the real one", trusted: true, remote: "10.1.2.3:80", xff: []string{"6.6.6.6, 203.0.113.9"}, want: "203.0.113.9"},
		{name: "chain of trusted proxies", trusted: true, remote: "10.1.2.3:80", xff: []string{"203.0.113.9, 192.0.2.7,10.9.9.9"}, want: "203.0.113.9"},
		{name: "several header fields are one list", trusted: true, remote: "10.1.2.3:80", xff: []string{"6.6.6.6, 203.0.113.9", "10.9.9.9"}, want: "203.0.113.9"},
		{name: "every entry trusted", trusted: true, remote: "10.1.2.3:80", xff: []string{"10.7.7.7, 10.8.8.8"}, want: "10.7.7.7"},
		{name: "trusted peer without header", trusted: true, remote: "10.1.2.3:80", want: "10.1.2.3"},
		{name: "entries with ports", trusted: true, remote: "10.1.2.3:80", xff: []string{"[2001:db8::1]:5555, 10.2.2.2:81"}, want: "2001:db8::1"},
		{name: "ipv6 peer and client", trusted: true, remote: "[fd00::1]:80", xff: []string{"2001:db8::5"}, want: "2001:db8::5"},
		{name: "ipv4-mapped peer", trusted: true, remote: "[::ffff:10.1.2.3]:80", xff: []string{"::ffff:203.0.113.9"}, want: "203.0.113.9"},
		{name: "empty entries skipped", trusted: true, remote: "10.1.2.3:80", xff: []string{"203.0.113.9, , "}, want: "203.0.113.9"},
		{name: "garbage before an untrusted entry is never read", trusted: true, remote: "10.1.2.3:80", xff: []string{"garbage, 203.0.113.9"}, want: "203.0.113.9"},
		{name: "garbage from a trusted proxy", trusted: true, remote: "10.1.2.3:80", xff: []string{"203.0.113.9, garbage"}, wantErr: true},
		{name: "unusable remote address", remote: "pipe", wantErr: true},
		{name: "x-real-ip from a trusted proxy", trusted: true, remote: "10.1.2.3:80", realIP: "203.0.113.9", want: "203.0.113.9"},
		{name: "x-real-ip from anyone else", trusted: true, remote: "198.51.100.1:80", realIP: "203.0.113.9", want: "198.51.100.1"},
		{name: "x-real-ip with a port", trusted: true, remote: "10.1.2.3:80", realIP: "203.0.113.9:80", want: "203.0.113.9"},
		{name: "x-real-ip with a port, ipv6", trusted: true, remote: "10.1.2.3:80", realIP: "[2001:db8::1]:80", want: "2001:db8::1"},
		// nginx with proxy_set_header X-Real-IP $remote_addr and
		// X-Forwarded-For $proxy_add_x_forwarded_for.
		{name: "x-real-ip names the entry the proxy appended", trusted: true, remote: "10.1.2.3:80", realIP: "203.0.113.9", xff: []string{"6.6.6.6", "203.0.113.9"}, want: "203.0.113.9"},
		// A proxy that passes the client's X-Real-IP on (or the client's
		// X-Forwarded-For): one of the two is forged, nobody can tell which.
		{name: "x-real-ip and x-forwarded-for disagree", trusted: true, remote: "10.1.2.3:80", realIP: "6.6.6.6", xff: []string{"203.0.113.9"}, wantErr: true},
		{name: "x-forwarded-for from the client beside x-real-ip", trusted: true, remote: "10.1.2.3:80", realIP: "203.0.113.9", xff: []string{"6.6.6.6"}, wantErr: true},
		{name: "bad x-real-ip from a trusted proxy", trusted: true, remote: "10.1.2.3:80", realIP: "nope", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var list []netip.Prefix
			if tt.trusted {
				list = trusted
			}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			if tt.realIP != "" {
				r.Header.Set("X-Real-IP", tt.realIP)
			}
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got, err := httplimit.ClientAddr(list)(r)
			if tt.wantErr {
				if !errors.Is(err, httplimit.ErrNoKey) {
					t.Fatalf("got %q, %v; want an error wrapping ErrNoKey", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got := mustPrefixes(t, "10.0.0.0/8", " 192.0.2.7 ", "2001:db8::/32", "::ffff:10.0.0.0/104", "10.1.2.3/8")
	want := []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32", "10.0.0.0/8", "10.0.0.0/8"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("prefix %d: got %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", ""} {
		if _, err := httplimit.ParseTrustedProxies([]string{"10.0.0.1", bad}); err == nil {
			t.Errorf("ParseTrustedProxies(%q): no error", bad)
		}
	}
}

func TestKeySources(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/x?a=1&token=t%2Bok+en&empty=&b=2", nil)
	r.RemoteAddr = "198.51.100.1:4000"
	r.Header.Set("X-Api-Key", "  k1  ")
	r.Header.Set("X-Blank", " ")
	r.AddCookie(&http.Cookie{Name: "session", Value: "s1"})
	tests := []struct {
		name string
		fn   httplimit.KeyFunc
		want string // "" means ErrNoKey
	}{
		{"header", httplimit.Header("x-api-key"), "k1"},
		{"missing header", httplimit.Header("X-Other"), ""},
		{"blank header", httplimit.Header("X-Blank"), ""},
		{"query", httplimit.Query("token"), "t+ok en"},
		{"escaped query name", httplimit.Query("b"), "2"},
		{"empty query", httplimit.Query("empty"), ""},
		{"missing query", httplimit.Query("nope"), ""},
		{"cookie", httplimit.Cookie("session"), "s1"},
		{"missing cookie", httplimit.Cookie("other"), ""},
		{"combine", httplimit.Combine(httplimit.ClientAddr(nil), httplimit.Header("X-Api-Key")), "198.51.100.1|k1"},
		{"combine needs every part", httplimit.Combine(httplimit.Header("X-Api-Key"), httplimit.Cookie("other")), ""},
		{"first of, first present", httplimit.FirstOf(httplimit.Header("X-Other"), httplimit.Cookie("session")), "1:s1"},
		{"first of, none present", httplimit.FirstOf(httplimit.Header("X-Other"), httplimit.Cookie("other")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.fn(r)
			if tt.want == "" {
				if !errors.Is(err, httplimit.ErrNoKey) {
					t.Fatalf("got %q, %v; want ErrNoKey", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// Combine must not let two different combinations share a key.
func TestCombineIsInjective(t *testing.T) {
	key := func(a, b string) string {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("A", a)
		r.Header.Set("B", b)
		k, err := httplimit.Combine(httplimit.Header("A"), httplimit.Header("B"))(r)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	pairs := [][2]string{{"x|", "y"}, {"x", "|y"}, {`x\`, "|y"}, {`x\|`, "y"}, {"x", `\|y`}}
	seen := map[string][2]string{}
	for _, p := range pairs {
		k := key(p[0], p[1])
		if q, ok := seen[k]; ok {
			t.Fatalf("%q and %q both make key %q", p, q, k)
		}
		seen[k] = p
	}
}

func TestQueryDoesNotMatchPrefix(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/?tokens=a&token", nil)
	if k, err := httplimit.Query("token")(r); !errors.Is(err, httplimit.ErrNoKey) {
		t.Fatalf("got %q, %v; want ErrNoKey", k, err)
	}
}
