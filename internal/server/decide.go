package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
)

// decide checks r against zones, all or nothing: one hit per limit of
// every zone, each zone keyed by its own key function. The outcome is in
// b.d. A check that fails on bad stored state is decided by the zones'
// strictest failure policy (see backend.settle). An error wrapping httplimit.ErrNoKey means the request carries no
// key for some zone.
func (s *Server) decide(r *http.Request, zones []*zone, group string, limiter sluice.Limiter, b *checkBuf) error {
	for _, z := range zones {
		key, err := z.key(r)
		if err != nil {
			err = fmt.Errorf("zone %q: %w", z.cfg.Name, err)
			s.traceDecision(r.Context(), zones, b, err)
			return err
		}
		b.c.Hits = z.hits(b.c.Hits, key)
	}
	b.c.Cost, b.c.Group = 1, group
	b.d.Prepare(len(b.c.Hits))
	err := limiter.Check(r.Context(), b.c, &b.d)
	bad := errors.Is(err, sluice.ErrBadState)
	if bad {
		policies := make([]config.FailurePolicy, len(zones))
		for i, z := range zones {
			policies[i] = z.cfg.Failure
		}
		err = s.backend.settle(r.Context(), strictest(policies...), b.c, &b.d, err)
	}
	s.metrics.observe(zones, &b.d, err, bad)
	s.observeTop(b.c, &b.d, err)
	s.traceDecision(r.Context(), zones, b, err)
	return err
}

// writeUndecided answers a proxied or auth_request request that could not
// be checked: no key (noKeyStatus), invalid input (400), or a store error
// the failure policy did not absorb (503).
func (s *Server) writeUndecided(w http.ResponseWriter, r *http.Request, err error, noKeyStatus int) {
	p := httplimit.Problem{Title: "Rate limiter unavailable", Status: http.StatusServiceUnavailable, Detail: "the rate limiter could not decide"}
	switch {
	case errors.Is(err, httplimit.ErrNoKey):
		p = httplimit.Problem{Title: "No rate limit key", Status: noKeyStatus, Detail: publicDetail(err)}
	case errors.Is(err, sluice.ErrInvalid):
		p = httplimit.Problem{Title: "Bad request", Status: http.StatusBadRequest, Detail: publicDetail(err)}
	default:
		s.logUndecided(r, err)
	}
	httplimit.WriteProblem(w, &p)
}
