package server

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpfields"
)

// The headers the auth_request endpoint reads, as nginx is told to set
// them (see docs/server.md).
const (
	headerRealIP         = "X-Real-Ip"
	headerForwardedFor   = "X-Forwarded-For"
	headerOriginalURI    = "X-Original-Uri"
	headerOriginalMethod = "X-Original-Method"
	headerOriginalHost   = "X-Original-Host"
)

// DefaultAuthDenyStatus is the status /v1/auth denies with: nginx's
// auth_request passes only 401 and 403 on (anything else becomes 500), so
// a denial is 403 and nginx maps it to 429 with error_page.
const DefaultAuthDenyStatus = http.StatusForbidden

// handleAuth serves /v1/auth?zone=NAME[&zone=NAME...][&deny_status=N], the
// target of nginx's auth_request: 204 when the original request may
// proceed, 403 (or deny_status) with Retry-After when it is denied, 401
// when it carries no key for a zone (or forwarding headers that disagree).
// The original request is described by X-Forwarded-For and X-Real-IP (see
// originalRequest), X-Original-URI, X-Original-Method and X-Original-Host
// (or Host), and its other headers, which nginx forwards.
func (s *Server) handleAuth(w http.ResponseWriter, r *http.Request) {
	st := s.state.Load()
	zones, group, denyStatus, err := st.authParams(r.URL.Query())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	orig, err := originalRequest(r, st.cfg.TrustedProxies)
	if errors.Is(err, httplimit.ErrNoKey) {
		s.writeUndecided(w, r, err, http.StatusUnauthorized)
		return
	}
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	policies := make([]config.FailurePolicy, len(zones))
	for i, z := range zones {
		policies[i] = z.cfg.Failure
	}
	b := s.getCheckBuf()
	defer s.putCheckBuf(b)
	limiter := s.backend.limiter(policies...)
	if len(zones) == 1 {
		limiter = zones[0].limiter // async if the zone is
	}
	if err := s.decide(orig, zones, group, limiter, b); err != nil {
		s.writeUndecided(w, r, err, http.StatusUnauthorized)
		return
	}
	if !b.d.Allowed {
		httpfields.WriteDenied(w, denyStatus, b.c, &b.d)
		return
	}
	httpfields.SetFields(w.Header(), b.c, &b.d)
	w.WriteHeader(http.StatusNoContent)
}

// authParams reads the zones and the deny status of an auth request.
func (st *state) authParams(q url.Values) (zones []*zone, group string, denyStatus int, err error) {
	denyStatus = DefaultAuthDenyStatus
	if v := q.Get("deny_status"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 400 || n > 499 {
			return nil, "", 0, badRequest("deny_status %q is not a 4xx status", truncate(v, 16))
		}
		denyStatus = n
	}
	for _, v := range q["zone"] {
		for name := range strings.SplitSeq(v, ",") {
			z := st.zones[name]
			if z == nil {
				return nil, "", 0, unknownZone(name)
			}
			if z.cfg.Group != "" && group != "" && z.cfg.Group != group {
				return nil, "", 0, badRequest("zones of one check must share their group: %q has %q, another has %q", name, z.cfg.Group, group)
			}
			if z.cfg.Group != "" {
				group = z.cfg.Group
			}
			zones = append(zones, z)
		}
	}
	if len(zones) == 0 {
		return nil, "", 0, badRequest("missing ?zone=NAME")
	}
	return zones, group, denyStatus, nil
}

// originalRequest rebuilds the request nginx is asking about, for the
// zones' key functions: its client address, its URI from X-Original-URI,
// its method and host, and the forwarded headers.
//
// The connection's peer is the front proxy asking (nginx, Traefik's
// ForwardAuth, Caddy's forward_auth). It may speak for the client when it
// is a loopback address or inside the configured trusted_proxies; the
// client address is then read from X-Forwarded-For and X-Real-IP exactly
// as the reverse proxy reads them (httplimit.ClientAddr, with the peer
// itself trusted too). From any other peer both headers are ignored and
// the peer is the client, so a caller that reaches the API listener
// directly cannot choose its own key. The zones then see the client as
// the peer of a request without forwarding headers.
func originalRequest(r *http.Request, trusted []netip.Prefix) (*http.Request, error) {
	orig := &http.Request{
		Method:     r.Method,
		Host:       r.Host,
		Header:     r.Header,
		RemoteAddr: r.RemoteAddr,
		URL:        &url.URL{Path: "/"},
	}
	orig = orig.WithContext(r.Context())
	if peer, ok := trustedPeer(r.RemoteAddr, trusted); ok {
		client, err := httplimit.ClientAddr(append(trusted[:len(trusted):len(trusted)], peer))(r)
		if err != nil {
			return nil, err
		}
		orig.RemoteAddr = net.JoinHostPort(client, "0")
	}
	if len(r.Header[headerForwardedFor]) > 0 || len(r.Header[headerRealIP]) > 0 {
		orig.Header = r.Header.Clone()
		delete(orig.Header, headerForwardedFor)
		delete(orig.Header, headerRealIP)
	}
	if uri := r.Header.Get(headerOriginalURI); uri != "" {
		u, err := url.ParseRequestURI(uri)
		if err != nil {
			return nil, badRequest("%s %q is not a request URI", headerOriginalURI, truncate(uri, 128))
		}
		orig.URL, orig.RequestURI = u, uri
	}
	if m := r.Header.Get(headerOriginalMethod); m != "" {
		orig.Method = m
	}
	if h := r.Header.Get(headerOriginalHost); h != "" {
		orig.Host = h
	}
	return orig, nil
}

// trustedPeer reports whether the connection's peer may speak for the
// client (a loopback address, or one inside trusted) and returns it as a
// one-address prefix.
func trustedPeer(remoteAddr string, trusted []netip.Prefix) (netip.Prefix, bool) {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}, false
	}
	a := ap.Addr().WithZone("").Unmap()
	self := netip.PrefixFrom(a, a.BitLen())
	if a.IsLoopback() {
		return self, true
	}
	for _, p := range trusted {
		if p.Contains(a) {
			return self, true
		}
	}
	return netip.Prefix{}, false
}
