package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/wire"
)

// apiProblem is a request the API refuses, with its status.
type apiProblem struct {
	status int
	title  string
	detail string
}

func (p *apiProblem) Error() string { return p.detail }

func badRequest(format string, args ...any) *apiProblem {
	return &apiProblem{status: http.StatusBadRequest, title: "Bad request", detail: fmt.Sprintf(format, args...)}
}

// writeProblem answers with err as application/problem+json: an
// *apiProblem as given, a too large body as 413, invalid input as 400,
// anything else as 503 (the store could not decide).
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	var (
		p  *apiProblem
		mb *http.MaxBytesError
	)
	switch {
	case errors.As(err, &p):
	case errors.As(err, &mb):
		p = &apiProblem{http.StatusRequestEntityTooLarge, "Request body too large", fmt.Sprintf("the body is larger than %d bytes", mb.Limit)}
	case errors.Is(err, sluice.ErrInvalid):
		p = badRequest("%s", publicDetail(err))
	default:
		s.logUndecided(r, err)
		// The cause (a Redis address, a timeout) is for the log, not for
		// any caller of the API.
		p = &apiProblem{http.StatusServiceUnavailable, "Rate limiter unavailable", "the store is unavailable or did not answer in time; the server log has the cause"}
	}
	httplimit.WriteProblem(w, &httplimit.Problem{Title: p.title, Status: p.status, Detail: p.detail})
}

// logUndecided logs a request the limiter could not decide: a warning,
// or a debug line when the client went away first.
func (s *Server) logUndecided(r *http.Request, err error) {
	level := slog.LevelWarn
	if r.Context().Err() != nil {
		level = slog.LevelDebug
	}
	s.log.Log(r.Context(), level, "could not decide", "path", r.URL.Path, "err", err)
}

// decodeRequest reads r's body into buf (reused storage, returned grown)
// and decodes it, one JSON object, strictly (see wire.DecodeRequest).
func decodeRequest(r *http.Request, buf []byte) (*wire.Request, []byte, error) {
	buf, err := readBody(r.Body, buf[:0])
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, buf, err
		}
		return nil, buf, badRequest("reading the body: %v", err)
	}
	req, err := wire.DecodeRequest(buf)
	if err != nil {
		return nil, buf, badRequest("invalid JSON body: %v", err)
	}
	return req, buf, nil
}

// readBody appends all of body to dst, as io.ReadAll does into a buffer
// of its own.
func readBody(body io.Reader, dst []byte) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := body.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// build fills c with the hits of req against the current zones.
func (st *state) build(req *wire.Request, c *sluice.Check) (*zone, error) {
	if req.Zone == "" {
		return nil, badRequest(`missing "zone"`)
	}
	z := st.zones[req.Zone]
	if z == nil {
		return nil, unknownZone(req.Zone)
	}
	keys := req.Keys
	switch {
	case req.Key != "" && len(req.Keys) > 0:
		return nil, badRequest(`set "key" or "keys", not both`)
	case req.Key != "":
		keys = []string{req.Key}
	case len(keys) == 0:
		return nil, badRequest(`missing "key" (or "keys")`)
	}
	if n := len(keys) * len(z.cfg.Limits); n > sluice.MaxHits {
		return nil, badRequest("%d keys × %d limits of zone %q make %d hits, more than %d", len(keys), len(z.cfg.Limits), z.cfg.Name, n, sluice.MaxHits)
	}
	for i, k := range keys {
		if k == "" {
			return nil, badRequest("keys[%d] is empty", i)
		}
		if slices.Index(keys, k) < i {
			return nil, badRequest("keys[%d] repeats keys[%d]", i, slices.Index(keys, k))
		}
		c.Hits = z.hits(c.Hits, k)
	}
	c.Cost = 1
	if req.Cost != nil {
		c.Cost = *req.Cost
	}
	c.Group = z.cfg.Group
	return z, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// handleCheck serves POST /v1/check: 200 with the decision when allowed,
// 429 with the decision and Retry-After when denied.
func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) {
	b := s.getCheckBuf()
	defer s.putCheckBuf(b)
	req, buf, err := decodeRequest(r, b.buf)
	b.buf = buf
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	st := s.state.Load()
	z, err := st.build(req, &b.c)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	b.d.Prepare(len(b.c.Hits))
	err = z.limiter.Check(r.Context(), b.c, &b.d)
	bad := errors.Is(err, sluice.ErrBadState)
	if bad {
		err = s.backend.settle(r.Context(), z.cfg.Failure, b.c, &b.d, err)
	}
	s.metrics.observe(z.self, &b.d, err, bad)
	s.observeTop(b.c, &b.d, err)
	s.traceDecision(r.Context(), z.self, b, err)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	policy := z.policy
	if len(b.c.Hits) != len(z.cfg.Limits) {
		policy = nil // several keys: one item per key and limit
	}
	setFields(w.Header(), policy, b)
	status := http.StatusOK
	if !b.d.Allowed {
		status = http.StatusTooManyRequests
	}
	var limits [sluice.MaxHits]wire.Limit
	resp := wire.Response{Limits: limits[:0]}
	response(&resp, z, b.c, &b.d)
	b.buf = wire.AppendResponse(b.buf[:0], &resp)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(status)
	w.Write(b.buf)
}

// handleReset serves POST /v1/reset: 204 once the keys' state in the zone
// is forgotten.
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	b := s.getCheckBuf()
	defer s.putCheckBuf(b)
	req, buf, err := decodeRequest(r, b.buf)
	b.buf = buf
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if req.Cost != nil {
		s.writeProblem(w, r, badRequest(`"cost" has no meaning in a reset`))
		return
	}
	st := s.state.Load()
	z, err := st.build(req, &b.c)
	if err == nil {
		err = z.limiter.Reset(r.Context(), b.c)
	}
	if err == nil {
		s.backend.forget(b.c)
		s.forgetTop(b.c)
	}
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	s.log.Info("reset", "zone", z.cfg.Name, "keys", len(b.c.Hits)/len(z.cfg.Limits))
	w.WriteHeader(http.StatusNoContent)
}
