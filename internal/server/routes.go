package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
)

// apiHandler routes an API or admin listener. An API listener serves the
// decision API, the auth_request endpoint and the operational endpoints;
// an admin listener serves the admin endpoints (config.Admin.Endpoints)
// and the operational endpoints. While an admin listener exists, the
// admin endpoints are answered 404 on API listeners.
func (s *Server) apiHandler(role config.Role) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/check", s.traced("/v1/check", s.postEndpoint(role, config.EndpointCheck, s.handleCheck)))
	mux.Handle("/v1/reset", s.postEndpoint(role, config.EndpointReset, s.handleReset))
	if role == config.API {
		mux.Handle("/v1/auth", s.traced("/v1/auth", http.HandlerFunc(s.handleAuth)))
	}
	metrics := promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{s}})
	mux.Handle("/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.adminAllows(w, r, role, config.EndpointMetrics) {
			metrics.ServeHTTP(w, r)
		}
	}))
	s.topRoutes(mux, role)
	mux.Handle("/healthz", onlyMethods(handleHealthz, http.MethodGet, http.MethodHead))
	mux.Handle("/readyz", onlyMethods(s.handleReadyz, http.MethodGet, http.MethodHead))
	if s.rls != nil { // envoyproxy/ratelimit's endpoints; /json spends counters as /v1/check does
		mux.Handle("/json", s.traced("/json", s.postEndpoint(role, config.EndpointCheck, s.rls.ServeJSON)))
		mux.Handle("/healthcheck", onlyMethods(handleHealthz, http.MethodGet, http.MethodHead))
	}
	endpoints := "POST /v1/check, POST /v1/reset, GET /v1/auth, /metrics, /healthz or /readyz"
	if role == config.AdminRole {
		endpoints = "the admin endpoints, /metrics, /healthz or /readyz"
	}
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httplimit.WriteProblem(w, &httplimit.Problem{Title: "Not found", Status: http.StatusNotFound,
			Detail: "no endpoint " + truncate(r.URL.Path, 128) + "; try " + endpoints})
	}))
	return mux
}

// postEndpoint guards the POST endpoint e on a listener of role: other
// methods get 405, the admin rules apply (adminAllows), and a body that is
// not declared application/json gets 415, so that a web page's form post
// (which a browser sends to any address without asking) cannot reach the
// API.
func (s *Server) postEndpoint(role config.Role, e config.Endpoint, h http.HandlerFunc) http.Handler {
	return onlyMethods(func(w http.ResponseWriter, r *http.Request) {
		if !s.adminAllows(w, r, role, e) {
			return
		}
		if !isJSON(r.Header.Get("Content-Type")) {
			w.Header().Set("Accept-Post", "application/json")
			writeProblem(w, http.StatusUnsupportedMediaType, "Unsupported media type", r.URL.Path+" accepts Content-Type: application/json only")
			return
		}
		h(w, r)
	}, http.MethodPost)
}

// adminAllows applies the admin rules to endpoint e on a listener of role,
// and answers the request when they refuse it. An admin endpoint is
// served only on admin listeners when there is one (404 elsewhere) and,
// when a token is configured, only with "Authorization: Bearer TOKEN" (401
// otherwise). Check and reset, when not admin endpoints, are not served on
// admin listeners; /metrics is, as an operational endpoint. Reset, which
// changes counters, is off (403) unless a listener or a token protects it
// or the configuration opens it (config.Config.ServesReset).
func (s *Server) adminAllows(w http.ResponseWriter, r *http.Request, role config.Role, e config.Endpoint) bool {
	cfg := s.state.Load().cfg
	admin := &cfg.Admin
	switch isAdmin := admin.IsAdmin(e); {
	case isAdmin && role != config.AdminRole && s.adminListener:
		writeProblem(w, http.StatusNotFound, "Not found", "no endpoint "+r.URL.Path+" on this listener; it is served on the admin listener")
		return false
	case !isAdmin && role == config.AdminRole && e != config.EndpointMetrics:
		writeProblem(w, http.StatusNotFound, "Not found", "no endpoint "+r.URL.Path+" on the admin listener; it is served on the api listener")
		return false
	case isAdmin && admin.Token != "" && !bearerMatches(r.Header.Get("Authorization"), admin.Token):
		if ok, suppressed := s.adminLogs.allow(); ok {
			s.log.Warn("admin endpoint refused: missing or wrong token", "path", r.URL.Path, "peer", r.RemoteAddr, "suppressed", suppressed)
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
		writeProblem(w, http.StatusUnauthorized, "Unauthorized", r.URL.Path+" needs the admin token: Authorization: Bearer TOKEN")
		return false
	case e == config.EndpointReset && !cfg.ServesReset():
		writeProblem(w, http.StatusForbidden, "Forbidden", config.ResetRefusal(r.URL.Path))
		return false
	}
	return true
}

func writeProblem(w http.ResponseWriter, status int, title, detail string) {
	httplimit.WriteProblem(w, &httplimit.Problem{Title: title, Status: status, Detail: detail})
}

// isJSON reports whether a Content-Type is application/json, with or
// without parameters such as charset=utf-8.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// bearerMatches reports whether an Authorization header carries token as a
// bearer token. The comparison takes the same time whatever the header
// holds: both sides are hashed to one length, then compared in constant
// time.
func bearerMatches(authorization, token string) bool {
	scheme, got, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		got = ""
	}
	a, b := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1 && ok
}

type slogPrinter struct{ s *Server }

func (p slogPrinter) Println(v ...any) { p.s.log.Warn("metrics", "err", v) }

// onlyMethods answers other methods with 405 and a problem body.
func onlyMethods(h http.HandlerFunc, methods ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(methods, r.Method) {
			w.Header().Set("Allow", methods[0])
			httplimit.WriteProblem(w, &httplimit.Problem{Title: "Method not allowed", Status: http.StatusMethodNotAllowed,
				Detail: r.URL.Path + " accepts " + methods[0]})
			return
		}
		h(w, r)
	})
}

func handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

// handleReadyz answers 503 until the store is warm (connected, scripts
// loaded: ready.go), and while the store cannot be reached and some
// zone's (or rate-limit domain's) failure policy is closed (every check of that zone would be
// denied); 200 otherwise, when checks are decided, degraded or not.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if !s.ready.ok.Load() {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready: connecting to the store and loading its scripts\n"))
		return
	}
	st := s.state.Load()
	closed := slices.ContainsFunc(st.cfg.Zones, func(z config.Zone) bool { return z.Failure == config.FailClosed })
	closed = closed || s.rls != nil && s.rls.Rules().FailsClosed()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !closed {
		w.Write([]byte("ready\n"))
		return
	}
	if err := s.backend.probe(r.Context(), s.running.Store.Timeout); err != nil && !isCanceled(r.Context()) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready: the store is unreachable and a zone's failure policy is closed: " + err.Error() + "\n"))
		return
	}
	w.Write([]byte("ready\n"))
}

func isCanceled(ctx context.Context) bool { return ctx.Err() != nil }
