package server

import (
	"context"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
)

// apiHandler routes the API listener: the decision API, the auth_request
// endpoint and the operational endpoints.
func (s *Server) apiHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/check", onlyMethods(s.handleCheck, http.MethodPost))
	mux.Handle("/v1/reset", onlyMethods(s.handleReset, http.MethodPost))
	mux.Handle("/v1/auth", http.HandlerFunc(s.handleAuth))
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{s}}))
	mux.Handle("/healthz", onlyMethods(handleHealthz, http.MethodGet, http.MethodHead))
	mux.Handle("/readyz", onlyMethods(s.handleReadyz, http.MethodGet, http.MethodHead))
	if s.rls != nil {
		mux.Handle("/json", http.HandlerFunc(s.rls.ServeJSON)) // envoyproxy/ratelimit's endpoints
		mux.Handle("/healthcheck", onlyMethods(handleHealthz, http.MethodGet, http.MethodHead))
	}
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httplimit.WriteProblem(w, &httplimit.Problem{Title: "Not found", Status: http.StatusNotFound,
			Detail: "no endpoint " + truncate(r.URL.Path, 128) + "; try POST /v1/check, POST /v1/reset, GET /v1/auth, /metrics, /healthz or /readyz"})
	}))
	return mux
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

// handleReadyz answers 503 while the store cannot be reached and some
// zone's (or rate-limit domain's) failure policy is closed (every check of that zone would be
// denied); 200 otherwise, when checks are decided, degraded or not.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
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
