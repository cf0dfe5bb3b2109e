package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

// checkRequest is the body of POST /v1/check and POST /v1/reset.
type checkRequest struct {
	// Zone names a configured zone. Required.
	Zone string `json:"zone"`
	// Key is the key to check; Keys several keys checked together. Exactly
	// one of them.
	Key  string   `json:"key"`
	Keys []string `json:"keys"`
	// Cost is what the check spends; absent means 1, 0 peeks.
	Cost *int64 `json:"cost"`
}

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
		p = badRequest("%s", strings.ReplaceAll(err.Error(), sluice.ErrInvalid.Error()+": ", ""))
	default:
		s.logUndecided(r, err)
		p = &apiProblem{http.StatusServiceUnavailable, "Rate limiter unavailable", err.Error()}
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

// decodeRequest reads one JSON object from r's body.
func decodeRequest(r *http.Request) (*checkRequest, error) {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	var req checkRequest
	var mb *http.MaxBytesError
	err := dec.Decode(&req)
	if err == nil {
		if _, next := dec.Token(); errors.As(next, &mb) {
			err = next
		} else if next != io.EOF {
			err = errors.New("data after the object")
		}
	}
	switch {
	case errors.As(err, &mb):
		return nil, err
	case err != nil:
		return nil, badRequest("invalid JSON body: %v", err)
	}
	return &req, nil
}

// build fills c with the hits of req against the current zones.
func (st *state) build(req *checkRequest, c *sluice.Check) (*zone, error) {
	if req.Zone == "" {
		return nil, badRequest(`missing "zone"`)
	}
	z := st.zones[req.Zone]
	if z == nil {
		return nil, &apiProblem{http.StatusNotFound, "Unknown zone", fmt.Sprintf("no zone named %q is configured (zones: %s)", truncate(req.Zone, 64), st.zoneList())}
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

func (st *state) zoneList() string {
	names := make([]string, 0, len(st.zones))
	for n := range st.zones {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) > 10 {
		names = append(names[:10], "...")
	}
	return strings.Join(names, ", ")
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
	req, err := decodeRequest(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	st := s.state.Load()
	b := s.getCheckBuf()
	defer s.putCheckBuf(b)
	z, err := st.build(req, &b.c)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	b.d.Prepare(len(b.c.Hits))
	err = z.limiter.Check(r.Context(), b.c, &b.d)
	s.metrics.observe(z.self, &b.d, err)
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
	b.buf = appendDecision(b.buf[:0], z, b.c, &b.d)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(status)
	w.Write(b.buf)
}

// handleReset serves POST /v1/reset: 204 once the keys' state in the zone
// is forgotten.
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	req, err := decodeRequest(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if req.Cost != nil {
		s.writeProblem(w, r, badRequest(`"cost" has no meaning in a reset`))
		return
	}
	st := s.state.Load()
	b := s.getCheckBuf()
	defer s.putCheckBuf(b)
	z, err := st.build(req, &b.c)
	if err == nil {
		err = z.limiter.Reset(r.Context(), b.c)
	}
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	s.log.Info("reset", "zone", z.cfg.Name, "keys", len(b.c.Hits)/len(z.cfg.Limits))
	w.WriteHeader(http.StatusNoContent)
}
