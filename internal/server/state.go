package server

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpfields"
)

// state is a configuration compiled for serving: zones with their key
// functions and limiters, proxy rules with their reverse proxies. A state
// is immutable; a reload builds a new one and swaps it in atomically, so a
// request sees one configuration from start to end.
type state struct {
	cfg   *config.Config
	zones map[string]*zone
	rules []*rule
	// defaultProxy serves proxied requests no rule matches; nil means 404.
	defaultProxy *httputil.ReverseProxy
}

// zone is a configured zone ready to check.
type zone struct {
	cfg      *config.Zone
	key      httplimit.KeyFunc
	limiter  sluice.Limiter
	counters [len(checkResults)]prometheus.Counter
	// self is a slice of this zone alone, for metrics.observe.
	self []*zone
	// labels and specs are each limit's Label and spec string.
	labels, specs []string
	// policy is the RateLimit-Policy field of a check of one key, which
	// does not depend on the key; nil when every limit is a shadow limit.
	policy []string
}

func (s *Server) newZone(z *config.Zone, key httplimit.KeyFunc) *zone {
	cz := &zone{cfg: z, key: key, limiter: s.backend.zoneLimiter(z), counters: s.metrics.zoneCounters(z.Name)}
	cz.self = []*zone{cz}
	for _, l := range z.Limits {
		cz.labels = append(cz.labels, l.Label())
		cz.specs = append(cz.specs, l.String())
	}
	cz.policy = policyField(cz.hits(nil, "k"))
	return cz
}

// policyField is the RateLimit-Policy field of a check of hits, computed
// once: it depends on the limits, not on the keys.
func policyField(hits []sluice.Hit) []string {
	if v := httpfields.AppendPolicy(nil, sluice.Check{Hits: hits}); len(v) > 0 {
		return []string{string(v)}
	}
	return nil
}

// setFields sets the RateLimit fields of an allowed check whose policy
// field was computed beforehand; denials go through httpfields.SetFields,
// which also sets Retry-After.
func setFields(h http.Header, policy []string, b *checkBuf) {
	if !b.d.Allowed || policy == nil {
		httpfields.SetFields(h, b.c, &b.d)
		return
	}
	h[httpfields.FieldPolicy] = policy
	b.buf = httpfields.AppendRateLimit(b.buf[:0], b.c, &b.d)
	if len(b.buf) > 0 {
		h[httpfields.FieldRateLimit] = []string{string(b.buf)}
	}
}

// hits appends the zone's hits for key to dst: one per limit.
func (z *zone) hits(dst []sluice.Hit, key string) []sluice.Hit {
	for _, l := range z.cfg.Limits {
		dst = append(dst, sluice.Hit{Zone: z.cfg.Name, Key: key, Limit: l})
	}
	return dst
}

// rule is a proxy rule ready to match and serve.
type rule struct {
	cfg     *config.Rule
	zones   []*zone
	group   string
	limiter sluice.Limiter
	proxy   *httputil.ReverseProxy
	// policy is the rule's RateLimit-Policy field, as zone.policy.
	policy []string
}

func (s *Server) compile(cfg *config.Config) (*state, error) {
	st := &state{cfg: cfg, zones: make(map[string]*zone, len(cfg.Zones))}
	for i := range cfg.Zones {
		z := &cfg.Zones[i]
		key, err := keyFunc(z.Key, cfg.TrustedProxies)
		if err != nil {
			return nil, fmt.Errorf("zone %q: %w", z.Name, err)
		}
		st.zones[z.Name] = s.newZone(z, key)
	}
	for i := range cfg.Proxy.Rules {
		st.rules = append(st.rules, s.compileRule(st, &cfg.Proxy.Rules[i]))
	}
	if cfg.Proxy.Upstream != nil {
		st.defaultProxy = s.reverseProxy(cfg.Proxy.Upstream)
	}
	if err := s.configureTop(cfg); err != nil { // last: a failed compile keeps the running zones tracked
		return nil, err
	}
	return st, nil
}

func (s *Server) compileRule(st *state, r *config.Rule) *rule {
	cr := &rule{cfg: r}
	var policies []config.FailurePolicy
	for _, name := range r.Zones {
		z := st.zones[name]
		cr.zones = append(cr.zones, z)
		policies = append(policies, z.cfg.Failure)
		if z.cfg.Group != "" {
			cr.group = z.cfg.Group
		}
	}
	cr.limiter = s.backend.limiter(policies...)
	if len(cr.zones) == 1 {
		cr.limiter = cr.zones[0].limiter // async if the zone is
	}
	var hits []sluice.Hit
	for _, z := range cr.zones {
		hits = z.hits(hits, "k")
	}
	cr.policy = policyField(hits)
	upstream := r.Upstream
	if upstream == nil {
		upstream = st.cfg.Proxy.Upstream
	}
	cr.proxy = s.reverseProxy(upstream)
	return cr
}

// keyFunc builds a zone's key function from httplimit's.
func keyFunc(k config.KeySource, trusted []netip.Prefix) (httplimit.KeyFunc, error) {
	if k.TrustedProxies != nil {
		trusted = k.TrustedProxies
	}
	fns := make([]httplimit.KeyFunc, 0, len(k.Parts))
	for _, p := range k.Parts {
		switch p.Kind {
		case config.ClientAddress:
			fns = append(fns, httplimit.ClientAddr(trusted))
		case config.Header:
			fns = append(fns, httplimit.Header(p.Name))
		case config.Query:
			fns = append(fns, httplimit.Query(p.Name))
		case config.Cookie:
			fns = append(fns, httplimit.Cookie(p.Name))
		default:
			return nil, fmt.Errorf("unknown key source %q", p)
		}
	}
	switch {
	case len(fns) == 1:
		return fns[0], nil
	case k.FirstOf:
		return httplimit.FirstOf(fns...), nil
	default:
		return httplimit.Combine(fns...), nil
	}
}

// checkBuf is the per-request storage of a check and its decision, pooled
// so the hot path does not allocate them.
type checkBuf struct {
	hits [sluice.MaxHits]sluice.Hit
	c    sluice.Check
	d    sluice.Decision
	// buf holds a response field or body while it is written.
	buf []byte
}

func (s *Server) getCheckBuf() *checkBuf {
	b, _ := s.bufs.Get().(*checkBuf)
	if b == nil {
		b = new(checkBuf)
	}
	b.c = sluice.Check{Hits: b.hits[:0]}
	return b
}

func (s *Server) putCheckBuf(b *checkBuf) {
	clear(b.hits[:])
	s.bufs.Put(b)
}
