package server

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpfields"
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
			pr.SetXForwarded() // X-Forwarded-Host: the normalised host
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
// allowed one goes upstream. Rules match the request's normalised path and
// host (see normalize), and the normalised path is what goes upstream.
func (s *Server) proxyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := normalize(r); err != nil {
			httplimit.WriteProblem(w, &httplimit.Problem{Title: "Bad request", Status: http.StatusBadRequest, Detail: err.Error()})
			return
		}
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

// normalize rewrites r's path and host into the forms rules match, so that
// spellings an upstream reads as the same resource cannot dodge a rule:
//
//   - the path (percent-decoded, as net/http gives it) has repeated slashes
//     merged and "." and ".." segments resolved, as path.Clean does,
//     keeping a trailing slash: "//api/x", "/./api/x", "/foo/../api/x" and
//     "/%2e/api/x" all become "/api/x". A path that changes is forwarded in
//     its cleaned form, so the upstream serves what the rule matched. A path
//     that would change and holds an encoded slash ("%2F") is refused:
//     decoded, its segments are not the upstream's. So is a path with a
//     literal backslash, which URLs do not allow and some servers read as
//     a slash.
//   - the host loses its port and trailing dots and is lower-cased:
//     "API.Example.COM.:443" matches as "api.example.com". The upstream
//     gets it in X-Forwarded-Host (with the port, if any).
//
// Paths stay case-sensitive, as URLs are: "/API/x" does not match a rule
// for "/api/".
func normalize(r *http.Request) error {
	if raw, _, _ := strings.Cut(r.RequestURI, "?"); strings.IndexByte(raw, '\\') >= 0 {
		return errors.New("the path holds a backslash, which a URL may not; encode it as %5C")
	}
	p := r.URL.Path
	clean := cleanPath(p)
	if clean != p {
		if r.URL.RawPath != "" && strings.Contains(strings.ToLower(r.URL.RawPath), "%2f") {
			return errors.New("the path holds an encoded slash (%2F) and dot segments or repeated slashes; send it in its plain form")
		}
		r.URL.Path, r.URL.RawPath = clean, ""
	}
	host, port := splitHost(r.Host)
	host = strings.ToLower(strings.TrimRight(host, "."))
	if port != "" {
		r.Host = net.JoinHostPort(host, port)
	} else {
		r.Host = host
	}
	return nil
}

// cleanPath returns p with repeated slashes merged and dot segments
// resolved, rooted, with a trailing slash kept (as net/http's ServeMux
// cleans paths).
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// splitHost splits a Host field into host and port ("" when absent).
func splitHost(hostport string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return hostport, ""
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
		httpfields.WriteDenied(w, http.StatusTooManyRequests, b.c, &b.d)
		return false
	}
	if st.cfg.Proxy.Headers == config.HeadersAlways {
		setFields(w.Header(), rl.policy, b)
	}
	return true
}

// match returns the first rule matching r, or nil. r is normalised. A
// rule for GET also matches HEAD, which asks for the same resource.
func (st *state) match(r *http.Request) *rule {
	host, _ := splitHost(r.Host)
	for _, rl := range st.rules {
		c := rl.cfg
		if c.Host != "" && !hostMatches(c.Host, host) {
			continue
		}
		if len(c.Methods) > 0 && !methodMatches(c.Methods, r.Method) {
			continue
		}
		if !strings.HasPrefix(r.URL.Path, c.PathPrefix) {
			continue
		}
		return rl
	}
	return nil
}

// methodMatches reports whether a rule's methods include m; HEAD counts as
// GET.
func methodMatches(methods []string, m string) bool {
	return slices.Contains(methods, m) || m == http.MethodHead && slices.Contains(methods, http.MethodGet)
}

// hostMatches matches a rule's host: exact, or "*.example.com" for any
// subdomain of example.com (not example.com itself).
func hostMatches(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return pattern == host
}
