package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// ErrNoKey marks a request from which a KeyFunc could not derive a key: a
// missing header, query argument or cookie, or an unusable client address.
// The middleware answers it with 400.
var ErrNoKey = errors.New("httplimit: no key in request")

// A KeyFunc returns the key a request is counted against: a client
// address, an API token, a user. It returns an error wrapping ErrNoKey when
// the request does not carry one. A KeyFunc must be safe for concurrent
// use.
type KeyFunc func(r *http.Request) (string, error)

// ClientAddr returns a KeyFunc that keys a request by its client's IP
// address, in its canonical text form ("192.0.2.1", "2001:db8::1";
// IPv4-mapped IPv6 addresses are unmapped).
//
// With no trusted proxies, the client is the peer of the connection
// (Request.RemoteAddr) and X-Forwarded-For is ignored: any client can send
// that header, so believing it would let every request choose its own key.
// When the peer is in trusted, X-Forwarded-For is read from the right (the
// entry the peer itself appended) leftwards, skipping entries that are
// themselves trusted proxies; the first untrusted entry is the client. If
// every entry is trusted, the leftmost one is the client. An entry that is
// not an IP address, found before an untrusted one, means a trusted proxy
// wrote garbage: the request has no key.
//
// Entries may carry a port ("192.0.2.1:1234", "[2001:db8::1]:1234") and
// several X-Forwarded-For fields are read as one list, in order. A trusted
// peer that sends no X-Forwarded-For may send X-Real-IP instead (nginx's
// proxy_set_header X-Real-IP $remote_addr): its one address, with or
// without a port, is the client. A peer that sends both must agree with
// itself: X-Real-IP must be the last X-Forwarded-For entry (the address
// the peer appended). When they differ, one of them came from the client
// unchanged (a proxy that sets X-Real-IP but passes the client's
// X-Forwarded-For on, or one that appends to X-Forwarded-For but passes
// the client's X-Real-IP on), nobody can tell which, and the request has
// no key. The Forwarded field (RFC 7239) is not read.
func ClientAddr(trusted []netip.Prefix) KeyFunc {
	trusted = append([]netip.Prefix(nil), trusted...)
	return func(r *http.Request) (string, error) {
		addr, err := clientAddr(r, trusted)
		if err != nil {
			return "", err
		}
		return addr.String(), nil
	}
}

func clientAddr(r *http.Request, trusted []netip.Prefix) (netip.Addr, error) {
	peer, err := parseAddr(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("httplimit: remote address %q is not an IP address: %w", r.RemoteAddr, ErrNoKey)
	}
	if !isTrusted(peer, trusted) {
		return peer, nil
	}
	client := peer
	values := r.Header.Values("X-Forwarded-For")
	if len(values) == 0 {
		return realIP(r, peer)
	}
	if err := agree(r, peer, values); err != nil {
		return netip.Addr{}, err
	}
	for i := len(values) - 1; i >= 0; i-- {
		list := values[i]
		for list != "" {
			var entry string
			if j := strings.LastIndexByte(list, ','); j >= 0 {
				list, entry = list[:j], list[j+1:]
			} else {
				list, entry = "", list
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			a, err := parseAddr(entry)
			if err != nil {
				return netip.Addr{}, fmt.Errorf("httplimit: X-Forwarded-For entry %q from trusted proxy %s is not an IP address: %w", entry, client, ErrNoKey)
			}
			client = a
			if !isTrusted(a, trusted) {
				return a, nil
			}
		}
	}
	return client, nil
}

// realIP returns the address in the X-Real-IP field a trusted peer sent,
// or the peer itself when there is none.
func realIP(r *http.Request, peer netip.Addr) (netip.Addr, error) {
	v := r.Header["X-Real-Ip"]
	if len(v) == 0 || strings.TrimSpace(v[0]) == "" {
		return peer, nil
	}
	a, err := parseAddr(strings.TrimSpace(v[0]))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("httplimit: X-Real-IP %q from trusted proxy %s is not an IP address: %w", v[0], peer, ErrNoKey)
	}
	return a, nil
}

// agree checks that an X-Real-IP field sent beside X-Forwarded-For names
// the last X-Forwarded-For entry.
func agree(r *http.Request, peer netip.Addr, xff []string) error {
	v := r.Header["X-Real-Ip"]
	if len(v) == 0 || strings.TrimSpace(v[0]) == "" {
		return nil
	}
	real, err := realIP(r, peer)
	if err != nil {
		return err
	}
	last := xff[len(xff)-1]
	if j := strings.LastIndexByte(last, ','); j >= 0 {
		last = last[j+1:]
	}
	last = strings.TrimSpace(last)
	if a, err := parseAddr(last); err != nil || a != real {
		return fmt.Errorf("httplimit: trusted proxy %s sent X-Real-IP %s but X-Forwarded-For ending in %q: one of them is the client's own; make the proxy set X-Real-IP and append to X-Forwarded-For, or send only one: %w", peer, real, last, ErrNoKey)
	}
	return nil
}

// parseAddr parses an IP address with an optional port, dropping any IPv6
// zone and unmapping IPv4-mapped IPv6 addresses.
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			return netip.Addr{}, err
		}
		a = ap.Addr()
	}
	return a.WithZone("").Unmap(), nil
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseTrustedProxies parses a list of proxy addresses for ClientAddr: CIDR
// prefixes ("10.0.0.0/8", "fd00::/8") or single addresses ("192.0.2.7",
// meaning /32 or /128). The error quotes the bad element.
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			if p.Addr().Is4In6() {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("httplimit: trusted proxy %d: %q is neither an IP address nor a CIDR prefix such as 10.0.0.0/8", i, s)
		}
		a = a.WithZone("").Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Header returns a KeyFunc that keys a request by the value of the named
// header field (the first one, surrounding spaces removed), such as an API
// key. A missing or empty field is ErrNoKey.
func Header(name string) KeyFunc {
	canonical := http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		if v := r.Header[canonical]; len(v) > 0 {
			if s := strings.TrimSpace(v[0]); s != "" {
				return s, nil
			}
		}
		return "", fmt.Errorf("httplimit: no %s header: %w", canonical, ErrNoKey)
	}
}

// Query returns a KeyFunc that keys a request by the named query argument
// (the first one), such as ?token=. A missing or empty argument is
// ErrNoKey.
func Query(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if v := queryValue(r.URL.RawQuery, name); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("httplimit: no query argument %q: %w", name, ErrNoKey)
	}
}

// queryValue returns the first value of name in a raw query, unescaped,
// without building the url.Values map that URL.Query allocates.
func queryValue(raw, name string) string {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(pair, "=")
		if k != name {
			if !strings.ContainsAny(k, "%+") {
				continue
			}
			if uk, err := unescapeQuery(k); err != nil || uk != name {
				continue
			}
		}
		if u, err := unescapeQuery(v); err == nil {
			return u
		}
		return ""
	}
	return ""
}

func unescapeQuery(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	return url.QueryUnescape(s)
}

// Cookie returns a KeyFunc that keys a request by the value of the named
// cookie, such as a session identifier. A missing or empty cookie is
// ErrNoKey.
func Cookie(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		c, err := r.Cookie(name)
		if err != nil || c.Value == "" {
			return "", fmt.Errorf("httplimit: no cookie %q: %w", name, ErrNoKey)
		}
		return c.Value, nil
	}
}

// Combine returns a KeyFunc whose key joins the keys of every fn, so that
// each combination counts separately: Combine(ClientAddr(nil),
// Header("X-API-Key")) limits each token from each address. Parts are
// joined with '|'; a '|' or '\' inside a part is escaped with '\', so two
// different combinations never make the same key. If any fn has no key,
// neither has the combination.
func Combine(fns ...KeyFunc) KeyFunc {
	fns = append([]KeyFunc(nil), fns...)
	return func(r *http.Request) (string, error) {
		var b strings.Builder
		for i, fn := range fns {
			k, err := fn(r)
			if err != nil {
				return "", err
			}
			if i > 0 {
				b.WriteByte('|')
			}
			writeEscaped(&b, k)
		}
		return b.String(), nil
	}
}

func writeEscaped(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '|' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
}

// FirstOf returns a KeyFunc that tries each fn in order and returns the
// first key found: FirstOf(Header("X-API-Key"), ClientAddr(nil)) limits
// callers by token, and anonymous callers by address. Errors other than
// ErrNoKey stop the search. The key is prefixed with the index of the fn
// that produced it ("0:", "1:", ...), so a token can never collide with an
// address. If no fn has a key, the error joins all of theirs.
func FirstOf(fns ...KeyFunc) KeyFunc {
	fns = append([]KeyFunc(nil), fns...)
	prefixes := make([]string, len(fns))
	for i := range prefixes {
		prefixes[i] = fmt.Sprintf("%d:", i)
	}
	return func(r *http.Request) (string, error) {
		var errs []error
		for i, fn := range fns {
			k, err := fn(r)
			if err == nil {
				return prefixes[i] + k, nil
			}
			if !errors.Is(err, ErrNoKey) {
				return "", err
			}
			errs = append(errs, err)
		}
		return "", errors.Join(errs...)
	}
}
