package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/rls"
	"github.com/sluicehq/sluice/internal/top"
	"github.com/sluicehq/sluice/internal/wire"
)

// Who is being limited: the wiring of package top into the server. Every
// decision of a zone (POST /v1/check, the proxy, auth_request) and of a
// rate-limit-service domain is observed; GET /v1/top serves the lists,
// POST /v1/top/reset resets a listed key by its ID, and /ui is a page over
// both (ui.go). They are served where the admin endpoints are: on the
// admin listener when there is one, and with the admin token when one is
// set.

// rlsPrefix starts the zone of every hit of the rate-limit service.
const rlsPrefix = "rls/"

// The query of GET /v1/top.
const (
	defaultTopKeys = 10
	maxTopKeys     = top.DefaultCapacity
	// rateSeconds is the span, in whole seconds before the current one,
	// over which a zone's rates are averaged.
	rateSeconds = 10
)

// openTop makes the tracker set of cfg; nil when tracking is disabled.
// Its keys' IDs are keyed with top.digest_secret_file's secret, or with
// a secret drawn now; a reload keeps the set, and so the secret.
func openTop(cfg *config.Config) (*top.Set, error) {
	if cfg.Top.Disabled {
		return nil, nil
	}
	opts := top.Options{Period: cfg.Top.Period, Sample: cfg.Top.Sample}
	switch {
	case cfg.Top.DigestSecret != "":
		opts.DigestKey = []byte(cfg.Top.DigestSecret)
	case cfg.Top.DigestSecretFile != "":
		return nil, fmt.Errorf("server: top.digest_secret_file %q was not read; load the configuration with config.Load", cfg.Top.DigestSecretFile)
	}
	return top.NewSet(opts)
}

// configureTop tracks the zones of cfg, keeping the domains' trackers.
func (s *Server) configureTop(cfg *config.Config) error {
	if s.top == nil {
		return nil
	}
	zones := make(map[string]bool, len(cfg.Zones))
	for _, z := range cfg.Zones {
		zones[z.Name] = z.ShowKeys
	}
	return s.top.Configure(zones, rlsPrefix)
}

// runTop keeps the trackers' clock until ctx ends.
func (s *Server) runTop(ctx context.Context) {
	if s.top != nil {
		go s.top.Run(ctx)
	}
}

// observeTop reports a decision to the trackers.
func (s *Server) observeTop(c sluice.Check, d *sluice.Decision, err error) {
	if s.top != nil && err == nil {
		s.top.Observe(c, d)
	}
}

// forgetTop removes reset keys from the lists.
func (s *Server) forgetTop(c sluice.Check) {
	if s.top != nil {
		s.top.Forget(c)
	}
}

// rlsLimiters returns the rate-limit service's limiter for a failure
// policy: the backend's, observed by the trackers (a tracker is added for
// each domain on its first check).
func (s *Server) rlsLimiters() func(config.FailurePolicy) sluice.Limiter {
	lims := map[config.FailurePolicy]sluice.Limiter{}
	for _, p := range []config.FailurePolicy{config.FailOpen, config.FailClosed, config.FailLocal} {
		lims[p] = s.traceRLS(s.backend.limiter(p))
		if s.top != nil {
			lims[p] = &top.Limiter{Next: lims[p], Set: s.top, AddPrefix: rlsPrefix}
		}
	}
	return func(p config.FailurePolicy) sluice.Limiter { return lims[p] }
}

// topRoutes registers the top endpoints and the page on mux.
func (s *Server) topRoutes(mux *http.ServeMux, role config.Role) {
	mux.Handle("/v1/top", onlyMethods(func(w http.ResponseWriter, r *http.Request) {
		if s.topAllows(w, r, role, true) {
			s.handleTop(w, r)
		}
	}, http.MethodGet, http.MethodHead))
	mux.Handle("/v1/top/reset", onlyMethods(func(w http.ResponseWriter, r *http.Request) {
		if !s.topAllows(w, r, role, true) {
			return
		}
		if !s.state.Load().cfg.ServesTopReset() {
			writeProblem(w, http.StatusForbidden, "Forbidden", config.ResetRefusal(r.URL.Path))
			return
		}
		if !isJSON(r.Header.Get("Content-Type")) {
			w.Header().Set("Accept-Post", "application/json")
			writeProblem(w, http.StatusUnsupportedMediaType, "Unsupported media type", r.URL.Path+" accepts Content-Type: application/json only")
			return
		}
		s.handleTopReset(w, r)
	}, http.MethodPost))
	s.uiRoutes(mux, role)
}

// topAllows answers the request and returns false when the top endpoints
// are off, served on another listener, or (withToken) the admin token is
// missing or wrong.
func (s *Server) topAllows(w http.ResponseWriter, r *http.Request, role config.Role, withToken bool) bool {
	admin := &s.state.Load().cfg.Admin
	switch {
	case s.top == nil:
		writeProblem(w, http.StatusNotFound, "Not found", "top-keys tracking is disabled (top.enabled: false)")
		return false
	case s.adminListener && role != config.AdminRole:
		writeProblem(w, http.StatusNotFound, "Not found", "no endpoint "+r.URL.Path+" on this listener; it is served on the admin listener")
		return false
	case withToken && admin.Token != "" && !bearerMatches(r.Header.Get("Authorization"), admin.Token):
		if ok, suppressed := s.adminLogs.allow(); ok {
			s.log.Warn("admin endpoint refused: missing or wrong token", "path", r.URL.Path, "peer", r.RemoteAddr, "suppressed", suppressed)
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
		writeProblem(w, http.StatusUnauthorized, "Unauthorized", r.URL.Path+" needs the admin token: Authorization: Bearer TOKEN")
		return false
	}
	return true
}

// TopReport is the body of GET /v1/top.
type TopReport struct {
	Now   time.Time  `json:"now"`
	Zones []TopZone  `json:"zones"`
	Store StoreState `json:"store"`
}

// TopZone is a zone's (or a rate-limit-service domain's) lists.
type TopZone struct {
	Name string `json:"name"`
	// Kind is "zone" or "rls" (a domain, named "rls/DOMAIN").
	Kind     string   `json:"kind"`
	Limits   []string `json:"limits,omitempty"`
	Shadow   bool     `json:"shadow,omitempty"`
	ShowKeys bool     `json:"show_keys"`
	Failure  string   `json:"failure,omitempty"`
	Mode     string   `json:"mode,omitempty"`
	// Sample is top.sample: one allowed check in Sample feeds the
	// admitted list, counted Sample times, so that list's counts are
	// estimates when it is above 1.
	Sample int `json:"sample"`
	// Rates are the checks per second over the last 10 whole seconds.
	Rates TopRates `json:"rates"`
	top.Snapshot
}

// TopRates are checks per second.
type TopRates struct {
	Allowed      float64 `json:"allowed"`
	Denied       float64 `json:"denied"`
	ShadowDenied float64 `json:"shadow_denied"`
}

// StoreState is the health of the store, as the page shows it.
type StoreState struct {
	Kind string `json:"kind"`
	// Breaker is "closed", "open" or "half-open"; empty for the memory
	// store, which has none.
	Breaker      string `json:"breaker,omitempty"`
	BreakerOpens uint64 `json:"breaker_opens"`
	Errors       uint64 `json:"errors"`
	Timeouts     uint64 `json:"timeouts"`
	Skipped      uint64 `json:"skipped"`
	DenyCacheHit uint64 `json:"deny_cache_hits"`
	// Async are the async zones' limiters.
	Async []AsyncState `json:"async,omitempty"`
}

// AsyncState is one async limiter's backlog.
type AsyncState struct {
	Policy       string  `json:"policy"`
	SyncInterval string  `json:"sync_interval"`
	Keys         int64   `json:"keys"`
	Pending      int64   `json:"pending_cost"`
	ViewAge      float64 `json:"view_age_seconds"`
	FlushErrors  uint64  `json:"flush_errors"`
	LastFlushSec float64 `json:"last_flush_seconds"`
}

// handleTop serves GET /v1/top[?zone=NAME][&n=N]: every zone's lists, or
// one zone's (404 for a zone not tracked), with the top N keys of each list
// (default 10, at most 64) and the store's health.
func (s *Server) handleTop(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n := defaultTopKeys
	if v := q.Get("n"); v != "" {
		x, err := strconv.Atoi(v)
		if err != nil || x < 1 || x > maxTopKeys {
			writeProblem(w, http.StatusBadRequest, "Bad request", "n: want a number of keys from 1 to "+strconv.Itoa(maxTopKeys))
			return
		}
		n = x
	}
	names := s.top.Names()
	if z := q.Get("zone"); z != "" {
		if s.top.Tracker(z) == nil {
			writeProblem(w, http.StatusNotFound, "Not found", "no tracked zone "+strconv.Quote(truncate(z, 128)))
			return
		}
		names = []string{z}
	}
	st := s.state.Load()
	rep := TopReport{Now: time.Now().UTC(), Zones: []TopZone{}, Store: s.backend.health()}
	for _, name := range names {
		t := s.top.Tracker(name)
		if t == nil {
			continue // dropped by a reload since Names
		}
		tz := topZone(st, name, t, n)
		tz.Sample = s.running.Top.Sample // the set's, made at start
		rep.Zones = append(rep.Zones, tz)
	}
	body, err := json.Marshal(&rep)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(append(body, '\n'))
}

func topZone(st *state, name string, t *top.Tracker, n int) TopZone {
	tz := TopZone{Name: name, Kind: "zone", ShowKeys: t.ShowKeys(), Snapshot: t.Snapshot(n)}
	if z := st.zones[name]; z != nil {
		tz.Limits, tz.Shadow = z.specs, z.cfg.Shadow
		tz.Failure, tz.Mode = string(z.cfg.Failure), string(z.cfg.Mode)
	} else if strings.HasPrefix(name, rlsPrefix) {
		tz.Kind = "rls"
	}
	secs := tz.Seconds
	if len(secs) > rateSeconds {
		for _, x := range secs[len(secs)-1-rateSeconds : len(secs)-1] {
			tz.Rates.Allowed += float64(x.Allowed) / rateSeconds
			tz.Rates.Denied += float64(x.Denied) / rateSeconds
			tz.Rates.ShadowDenied += float64(x.ShadowDenied) / rateSeconds
		}
	}
	return tz
}

// health reports the store's breaker, errors and async backlog.
func (b *backend) health() StoreState {
	h := StoreState{Kind: string(config.Memory)}
	if b.remote {
		h.Kind = "redis"
	}
	if b.breaker != nil {
		bs := b.breaker.Stats()
		h.Breaker, h.BreakerOpens = bs.State.String(), bs.Opens
	}
	for _, chain := range b.policies {
		if chain.guard != nil {
			gs := chain.guard.Stats()
			h.Errors += gs.StoreErrors
			h.Timeouts += gs.Timeouts
			h.Skipped += gs.Skipped
		}
		if chain.cache != nil {
			h.DenyCacheHit += chain.cache.Stats().Hits
		}
	}
	b.amu.Lock()
	defer b.amu.Unlock()
	for k, a := range b.asyncs {
		as := a.Stats()
		h.Async = append(h.Async, AsyncState{Policy: string(k.policy), SyncInterval: k.interval.String(), Keys: as.Keys, Pending: as.Pending,
			ViewAge: as.ViewAge.Seconds(), FlushErrors: as.FlushErrors, LastFlushSec: as.LastFlush.Seconds()})
	}
	return h
}

// topResetRequest is the body of POST /v1/top/reset.
type topResetRequest struct {
	Zone string `json:"zone"`
	ID   string `json:"id"`
}

// handleTopReset serves POST /v1/top/reset {"zone": Z, "id": ID}: the
// key listed in zone Z under ID (its keyname digest) is reset as POST
// /v1/reset would, and leaves the lists; for a rate-limit-service domain
// ("rls/DOMAIN"), the counter of the rule that the listed descriptor
// selects is reset. 204 when done; 404 when no list of the zone holds the
// key whole, or no rule of the domain selects it now (a limit override's
// counter, or rules reloaded since).
func (s *Server) handleTopReset(w http.ResponseWriter, r *http.Request) {
	var req topResetRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.writeProblem(w, r, badRequest("invalid JSON body: %v", wire.TypeError(err, map[string]string{"zone": "a string", "id": "a string"})))
		return
	}
	st := s.state.Load()
	z := st.zones[req.Zone]
	domain, isDomain := strings.CutPrefix(req.Zone, rlsPrefix)
	if z == nil && (!isDomain || s.rls == nil) {
		s.writeProblem(w, r, unknownZone(req.Zone))
		return
	}
	t := s.top.Tracker(req.Zone)
	key, ok := "", false
	if t != nil {
		key, ok = t.Lookup(req.ID)
	}
	notFound := func(why string) {
		writeProblem(w, http.StatusNotFound, "Not found", "no key "+strconv.Quote(truncate(req.ID, 64))+" "+why+" "+strconv.Quote(truncate(req.Zone, 128)))
	}
	if !ok {
		notFound("listed in zone")
		return
	}
	var c sluice.Check
	var err error
	if z != nil {
		c = sluice.Check{Hits: z.hits(nil, key), Group: z.cfg.Group}
		err = z.limiter.Reset(r.Context(), c)
	} else if c, err = s.rls.Reset(r.Context(), domain, key); errors.Is(err, rls.ErrNoCounter) {
		notFound("that a rule's counter holds in")
		return
	}
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	s.backend.forget(c)
	s.top.Forget(c)
	s.log.Info("reset from the top list", "zone", req.Zone, "key", req.ID)
	w.WriteHeader(http.StatusNoContent)
}
