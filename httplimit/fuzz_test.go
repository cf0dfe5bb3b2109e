package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
)

// Whatever a client sends in X-Forwarded-For and X-Real-IP, ClientAddr
// returns a canonical IP address or ErrNoKey, and an untrusted peer is
// always keyed by its own address.
func FuzzClientAddr(f *testing.F) {
	f.Add("10.0.0.1:80", "203.0.113.9, 10.0.0.2", "")
	f.Add("10.0.0.1:80", "garbage,,, [::1]:80", "1.2.3.4")
	f.Add("198.51.100.1:1", "10.0.0.9", "")
	f.Add("[fd00::1]:80", "::ffff:1.2.3.4%eth0", "x")
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	key := httplimit.ClientAddr(trusted)
	f.Fuzz(func(t *testing.T, remote, xff, realIP string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		r.Header["X-Forwarded-For"] = []string{xff}
		r.Header["X-Real-Ip"] = []string{realIP}
		k, err := key(r)
		if err != nil {
			if !errors.Is(err, httplimit.ErrNoKey) {
				t.Fatalf("error %v does not wrap ErrNoKey", err)
			}
			return
		}
		a, perr := netip.ParseAddr(k)
		if perr != nil || a.String() != k || a.Is4In6() || a.Zone() != "" {
			t.Fatalf("key %q is not a canonical address", k)
		}
		if peer, perr := netip.ParseAddrPort(remote); perr == nil {
			p := peer.Addr().WithZone("").Unmap()
			untrusted := !trusted[0].Contains(p) && !trusted[1].Contains(p)
			if untrusted && k != p.String() {
				t.Fatalf("untrusted peer %s keyed as %q", remote, k)
			}
		}
	})
}

// ParseTrustedProxies accepts what netip accepts and quotes the rest.
func FuzzParseTrustedProxies(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "192.0.2.7", "::ffff:10.0.0.0/104", "fe80::1%eth0", "1.2.3.4/40", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := httplimit.ParseTrustedProxies([]string{s})
		if err != nil {
			return
		}
		if len(ps) != 1 || !ps[0].IsValid() || ps[0] != ps[0].Masked() {
			t.Fatalf("%q parsed as %v", s, ps)
		}
	})
}
