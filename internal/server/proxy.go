package server

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
)

// newTransport is the transport of every upstream: bounded dials and
// response waits, and enough idle connections for a busy proxy.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// reverseProxy returns a proxy to upstream that sets X-Forwarded-For,
// -Host and -Proto (appending to the client's X-Forwarded-For) and answers
// upstream failures with a problem body.
func (s *Server) reverseProxy(upstream *url.URL) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
			pr.SetXForwarded()
		},
		Transport:    s.transport,
		ErrorHandler: s.upstreamError,
		ErrorLog:     slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

func (s *Server) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		s.writeProblem(w, r, err)
		return
	}
	s.metrics.proxyErrors.Inc()
	if ok, suppressed := s.upstreamLogs.allow(); ok {
		s.log.Warn("upstream error", "method", r.Method, "path", r.URL.Path, "err", err, "suppressed", suppressed)
	}
	httplimit.WriteProblem(w, &httplimit.Problem{Title: "Bad gateway", Status: http.StatusBadGateway, Detail: "the upstream did not answer"})
}

// proxyHandler serves a proxy listener: the first rule that matches a
// request decides its zones and upstream; a denied request gets 429, an
// allowed one goes upstream.
func (s *Server) proxyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := s.state.Load()
		rl := st.match(r)
		if rl == nil {
			if st.defaultProxy == nil {
				httplimit.WriteProblem(w, &httplimit.Problem{Title: "Not found", Status: http.StatusNotFound, Detail: "no proxy rule matches this request"})
				return
			}
			st.defaultProxy.ServeHTTP(w, r)
			return
		}
		if len(rl.zones) > 0 && !s.admit(w, r, st, rl) {
			return
		}
		rl.proxy.ServeHTTP(w, r)
	})
}

// admit checks r against rl's zones and reports whether it may go
// upstream; when not, the response is written.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, st *state, rl *rule) bool {
	b := s.getCheckBuf()
	defer s.putCheckBuf(b)
	if err := s.decide(r, rl.zones, rl.group, rl.limiter, b); err != nil {
		s.writeUndecided(w, r, err, http.StatusBadRequest)
		return false
	}
	if !b.d.Allowed {
		httplimit.WriteDenied(w, http.StatusTooManyRequests, b.c, &b.d)
		return false
	}
	if st.cfg.Proxy.Headers == config.HeadersAlways {
		setFields(w.Header(), rl.policy, b)
	}
	return true
}

// match returns the first rule matching r, or nil.
func (st *state) match(r *http.Request) *rule {
	host := requestHost(r)
	for _, rl := range st.rules {
		c := rl.cfg
		if c.Host != "" && !hostMatches(c.Host, host) {
			continue
		}
		if len(c.Methods) > 0 && !slices.Contains(c.Methods, r.Method) {
			continue
		}
		if !strings.HasPrefix(r.URL.Path, c.PathPrefix) {
			continue
		}
		return rl
	}
	return nil
}

// requestHost is r's host, lower case, without port.
func requestHost(r *http.Request) string {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(host)
}

// hostMatches matches a rule's host: exact, or "*.example.com" for any
// subdomain of example.com (not example.com itself).
func hostMatches(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return pattern == host
}
