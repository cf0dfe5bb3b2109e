package rls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpfields"
	"github.com/sluicehq/sluice/internal/ident"
)

// Options configure a Service. Limiter is required.
type Options struct {
	// Limiter returns the limiter that decides the checks of a domain with
	// the given failure policy. Required.
	Limiter func(config.FailurePolicy) sluice.Limiter
	// BadState decides, by the domain's failure policy, a check that
	// failed with sluice.ErrBadState (data that is not sluice's under one
	// of its keys: the store is healthy, this check alone could not be
	// decided), writing the decision to d. Default: such a check is
	// denied, as under the closed policy.
	BadState func(ctx context.Context, policy config.FailurePolicy, c sluice.Check, d *sluice.Decision, err error) error
	// Logger receives the service's logs. Default: discard.
	Logger *slog.Logger
	// Registerer receives the service's metrics. Default: none.
	Registerer prometheus.Registerer
	// ResponseHeaders adds envoyproxy/ratelimit's RateLimit-Limit,
	// RateLimit-Remaining and RateLimit-Reset of the descriptor closest to
	// its limit to response_headers_to_add, as its
	// LIMIT_RESPONSE_HEADERS_ENABLED does. Default: false.
	ResponseHeaders bool
	// Shadow is envoyproxy/ratelimit's SHADOW_MODE: requests are decided
	// and counted as usual, each descriptor keeps its code, and the
	// overall code is OK. Default: false.
	Shadow bool
}

// Service answers Envoy's ShouldRateLimit from a set of Rules. It is safe
// for concurrent use; SetRules swaps the rules atomically.
type Service struct {
	opts    Options
	log     *slog.Logger
	rules   atomic.Pointer[Rules]
	metrics *metrics
	// oversizedLogged is when an oversized request was last logged, in
	// Unix nanoseconds.
	oversizedLogged atomic.Int64
}

// New returns a Service that serves rules.
func New(rules *Rules, opts Options) (*Service, error) {
	if opts.Limiter == nil {
		return nil, errors.New("rls: Options.Limiter is required")
	}
	if rules == nil {
		return nil, errors.New("rls: no rules")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{opts: opts, log: opts.Logger, metrics: newMetrics()}
	if opts.Registerer != nil {
		if err := s.metrics.register(opts.Registerer); err != nil {
			return nil, fmt.Errorf("rls: metrics: %w", err)
		}
	}
	s.rules.Store(rules)
	return s, nil
}

// SetRules serves r from the next request on.
func (s *Service) SetRules(r *Rules) { s.rules.Store(r) }

// Rules returns the rules being served.
func (s *Service) Rules() *Rules { return s.rules.Load() }

// descriptor is one request descriptor being decided.
type descriptor struct {
	m    match
	lim  *limit
	cost int64
	hit  int // index in the check's hits; -1 when not checked
	// before and after are the costs of the descriptors of the same hit
	// before and after this one in the request: every occurrence of a
	// counter is charged, and reports the count as of its own charge.
	before, after int64
	state         int // one of the descriptor states below
}

const (
	noLimit    = iota // no rule, a replaced rule, or an empty descriptor
	unlimited         // an unlimited rule: OK without the store
	checked           // a hit of the check
	impossible        // requests_per_unit 0, or a cost above the rate
)

// ShouldRateLimit decides req: one all-or-nothing sluice check of every
// descriptor that a limit applies to (one per hits_addend when they differ:
// checkGroups). It returns a gRPC status error for a
// malformed request (InvalidArgument) or when the store could not decide
// and the domain's failure policy did not absorb it (Unavailable).
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	resp, domain, err := s.decide(ctx, req)
	s.metrics.request(domain, resp, err)
	return resp, err
}

func (s *Service) decide(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, *Domain, error) {
	if req.GetDomain() == "" {
		return nil, nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	}
	dom := s.rules.Load().Domain(req.Domain)
	descs := make([]descriptor, len(req.Descriptors))
	if dom == nil {
		// envoyproxy/ratelimit answers an unknown domain OK, without limits.
		return s.respond(nil, descs, sluice.Check{}, &sluice.Decision{}, false), nil, nil
	}
	if err := dom.plan(req, descs); err != nil {
		return nil, dom, err
	}
	if n := limited(descs); n > MaxLimitedDescriptors {
		return s.oversized(dom, descs, n), dom, nil
	}
	c, costs, blocked := dom.check(descs)
	var d sluice.Decision
	if len(c.Hits) > 0 {
		var err error
		if costs != nil {
			err = checkGroups(ctx, s.opts.Limiter(dom.Failure), c, costs, &d)
		} else {
			err = checkAll(ctx, s.opts.Limiter(dom.Failure), c, &d)
		}
		bad := errors.Is(err, sluice.ErrBadState)
		if bad {
			err = s.settle(ctx, dom.Failure, c, &d, err)
		}
		switch {
		case errors.Is(err, sluice.ErrInvalid):
			return nil, dom, status.Error(codes.InvalidArgument, err.Error())
		case err != nil && ctx.Err() != nil:
			return nil, dom, status.FromContextError(ctx.Err()).Err()
		case err != nil:
			s.log.Warn("could not decide", "domain", dom.Name, "err", err)
			return nil, dom, status.Errorf(codes.Unavailable, "rls: the store could not decide: %v", err)
		}
		switch {
		case bad:
			s.metrics.badState(dom.Name, d.Source.String())
		case d.Source.Degraded():
			s.metrics.degraded(dom.Name, d.Source.String())
		}
	}
	resp := s.respond(dom, descs, c, &d, blocked)
	return resp, dom, nil
}

// settle decides a check that failed with sluice.ErrBadState by policy,
// with Options.BadState (denied when it is nil).
func (s *Service) settle(ctx context.Context, policy config.FailurePolicy, c sluice.Check, d *sluice.Decision, err error) error {
	if s.opts.BadState != nil {
		return s.opts.BadState(ctx, policy, c, d, err)
	}
	d.Degrade(sluice.FromFailClosed, false, edge.FailClosedRetryAfter)
	return nil
}

// plan matches every descriptor of req (or takes its limit override),
// applies replaces and the hits addends.
func (d *Domain) plan(req *pb.RateLimitRequest, descs []descriptor) error {
	var replaced map[string]bool // allocated only when some limit replaces another
	entries := make([]entry, 0, 4)
	for i, pd := range req.Descriptors {
		entries = entries[:0]
		for _, e := range pd.GetEntries() {
			entries = append(entries, entry{e.GetKey(), e.GetValue()})
		}
		dd := &descs[i]
		dd.hit = -1
		if len(entries) == 0 {
			continue
		}
		dd.cost = int64(max(req.HitsAddend, 1))
		if h := pd.GetHitsAddend(); h != nil {
			dd.cost = int64(min(h.GetValue(), math.MaxInt64))
		}
		if o := pd.GetLimit(); o != nil {
			lim, err := d.override(o, entries)
			if err != nil {
				return status.Errorf(codes.InvalidArgument, "descriptor %d: %v", i, err)
			}
			dd.m, dd.lim = match{key: entriesKey(entries), metric: lim.sl.Name}, lim
			continue
		}
		m, ok := d.match(entries)
		if !ok {
			continue
		}
		dd.m, dd.lim = m, m.rule.limit
		for _, name := range dd.lim.replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[name] = true
		}
	}
	for i := range descs {
		dd := &descs[i]
		switch {
		case dd.lim == nil:
		case dd.lim.name != "" && replaced[dd.lim.name]:
			dd.lim = nil
		case dd.lim.unlimited:
			dd.state = unlimited
		case dd.lim.sl.Rate == 0 || dd.cost > dd.lim.sl.Rate:
			dd.state = impossible
		default:
			dd.state = checked
		}
	}
	return nil
}

// limited counts the descriptors with a limit to check.
func limited(descs []descriptor) int {
	n := 0
	for i := range descs {
		if s := descs[i].state; s == checked || s == impossible {
			n++
		}
	}
	return n
}

// oversized answers a request with more than MaxLimitedDescriptors
// descriptors with a limit without asking the store: each of them is
// OVER_LIMIT (shadow rules and rls.shadow_mode excepted), so that the
// request is denied rather than failed, which Envoy's default
// failure_mode_deny: false would let through unlimited. It is counted in
// sluice_rls_oversized_requests_total and logged.
func (s *Service) oversized(dom *Domain, descs []descriptor, n int) *pb.RateLimitResponse {
	s.metrics.oversized.WithLabelValues(dom.Name).Inc()
	if now := time.Now().UnixNano(); now-s.oversizedLogged.Load() >= int64(oversizedLogInterval) {
		s.oversizedLogged.Store(now)
		s.log.Warn("request with too many limited descriptors answered OVER_LIMIT", "domain", dom.Name, "descriptors", n, "max", MaxLimitedDescriptors)
	}
	for i := range descs {
		if descs[i].state == checked {
			descs[i].state = impossible
		}
	}
	return s.respond(dom, descs, sluice.Check{}, &sluice.Decision{}, true)
}

// oversizedLogInterval is the least time between two log lines about
// oversized requests.
const oversizedLogInterval = 10 * time.Second

// check builds the sluice check of the descriptors in the checked state
// (any number of hits: checkAll splits it). Descriptors that select the
// same counter (the same state: internal/ident) share a hit, under the
// stricter of their limits, charged the sum of their costs, as
// envoyproxy/ratelimit charges each occurrence. A non-shadow impossible
// descriptor, or a counter whose occurrences together ask for more than
// its limit, blocks the request: the check becomes a peek (cost 0), so
// that the others report their state and nothing is recorded. costs is nil
// when every hit has c.Cost; otherwise (descriptors with different
// hits_addend, or a counter named more than once) it is each hit's cost,
// for checkGroups. Options.Shadow does not change the check: the request
// is decided and counted as usual, and only its overall code is OK.
func (d *Domain) check(descs []descriptor) (c sluice.Check, costs []int64, blocked bool) {
	for i := range descs {
		dd := &descs[i]
		if dd.state == impossible && !dd.lim.sl.Shadow {
			blocked = true
		}
		if dd.state != checked {
			continue
		}
		hit := sluice.Hit{Zone: "rls/" + d.Name, Key: dd.m.key, Limit: dd.lim.sl}
		dd.hit = -1
		for j, h := range c.Hits {
			if stateOf(h) == stateOf(hit) {
				dd.hit, dd.before = j, costs[j]
				costs[j] += dd.cost
				c.Hits[j].Limit = stricter(h.Limit, hit.Limit)
				break
			}
		}
		if dd.hit < 0 {
			dd.hit = len(c.Hits)
			c.Hits = append(c.Hits, hit)
			costs = append(costs, dd.cost)
		}
	}
	uniform := true
	for j, h := range c.Hits {
		uniform = uniform && costs[j] == costs[0]
		if costs[j] > h.Limit.Rate {
			blocked = true
		}
	}
	for i := range descs {
		if dd := &descs[i]; dd.state == checked {
			dd.after = costs[dd.hit] - dd.before - dd.cost
		}
	}
	if len(costs) > 0 {
		c.Cost = costs[0]
	}
	if blocked || uniform {
		costs = nil
	}
	if blocked {
		c.Cost = 0
	}
	return c, costs, blocked
}

// stateOf is the identity of the state a hit of an rls check names (rls
// checks have no group).
func stateOf(h sluice.Hit) ident.State {
	return ident.State{Zone: h.Zone, Key: h.Key,
		Limit: ident.LimitOf(string(h.Limit.Algo()), h.Limit.Window, h.Limit.Bucket())}
}

// stricter returns the limit that holds one counter to both a and b: an
// enforced one over a shadow one, else the lower rate, which admits the
// least. Neither descriptor's limit is dropped without a word: the looser
// descriptor reports the remaining count of the stricter one.
func stricter(a, b sluice.Limit) sluice.Limit {
	switch {
	case a.Shadow != b.Shadow:
		if a.Shadow {
			return b
		}
		return a
	case b.Rate < a.Rate:
		return b
	}
	return a
}

// respond builds the response from the decision d of check c. Each
// descriptor reports its counter as of its own charge (occurrence), as
// envoyproxy/ratelimit does; Options.Shadow makes only the overall code OK.
func (s *Service) respond(dom *Domain, descs []descriptor, c sluice.Check, d *sluice.Decision, blocked bool) *pb.RateLimitResponse {
	resp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK, Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(descs))}
	hasHits := len(d.Hits) == len(c.Hits) && len(c.Hits) > 0
	recorded := hasHits && d.Allowed && !blocked
	for i := range descs {
		dd := &descs[i]
		st := &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
		resp.Statuses[i] = st
		switch dd.state {
		case noLimit:
			continue
		case unlimited:
			st.LimitRemaining = math.MaxUint32
			s.metrics.descriptor(dom.Name, &dd.m, "unlimited")
			continue
		}
		st.CurrentLimit = dd.lim.current
		over := false
		switch {
		case dd.state == impossible:
			// Never passes: the wait is a whole window.
			over = true
			st.DurationUntilReset = durationpb.New(dd.lim.sl.Window)
		case hasHits:
			h := &d.Hits[dd.hit]
			var rem int64
			rem, over = occurrence(h, c.Hits[dd.hit].Limit.Rate, dd, recorded)
			if scaled := int64(dd.lim.perUnit) - dd.lim.sl.Rate; scaled > 0 && !over {
				// requests_per_unit above sluice.MaxRate: what is left of
				// it after the usage of the shortened window (scale).
				rem += scaled
			}
			st.LimitRemaining = uint32(min(rem, math.MaxUint32))
			wait := h.ResetAfter
			if !h.Allowed {
				wait = h.RetryAfter
			}
			st.DurationUntilReset = durationpb.New(wait)
		case !d.Allowed && !blocked:
			// Decided without the store by a closed failure policy.
			over = true
		}
		result := "ok"
		switch {
		case over && dd.lim.sl.Shadow:
			result = "shadow_over_limit"
		case over:
			result = "over_limit"
			if s.opts.Shadow {
				result = "shadow_over_limit"
			}
			st.Code = pb.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
		}
		s.metrics.descriptor(dom.Name, &dd.m, result)
	}
	if s.opts.ResponseHeaders {
		resp.ResponseHeadersToAdd = headers(resp.Statuses, descs)
	}
	if s.opts.Shadow {
		resp.OverallCode = pb.RateLimitResponse_OK
	}
	return resp
}

// occurrence is a checked descriptor's limit_remaining and whether it is over
// its limit, from its hit's result h (rate is the hit's limit): the count
// after its own charge, the charges of the counter's later occurrences in
// the request taken back when the check was recorded, its earlier ones
// added when it was not. A hit with room for all its charges in an
// unrecorded check (another hit denied it, or it was a peek)
// reports the count without this request's cost, as
// envoyproxy/ratelimit reports a counter it did not increment.
func occurrence(h *sluice.HitResult, rate int64, dd *descriptor, recorded bool) (remaining int64, over bool) {
	rem := h.Remaining // floor(rate - used), clamped at 0
	if h.Used > float64(rate) {
		rem = int64(math.Floor(float64(rate) - h.Used))
	}
	switch {
	case recorded:
		rem += dd.after
	case h.Allowed && rem >= dd.before+dd.cost+dd.after:
		rem -= dd.before
	default:
		rem -= dd.before + dd.cost
	}
	if rem < 0 {
		return 0, true
	}
	return rem, false
}

// headers are envoyproxy/ratelimit's RateLimit-Limit, RateLimit-Remaining
// and RateLimit-Reset fields of the descriptor closest to its limit: the
// last one over its limit, otherwise the first with the least
// limit_remaining. None when no descriptor has a limit.
func headers(statuses []*pb.RateLimitResponse_DescriptorStatus, descs []descriptor) []*corev3.HeaderValue {
	var pick *pb.RateLimitResponse_DescriptorStatus
	least := uint32(math.MaxUint32)
	for i, st := range statuses {
		if descs[i].state == unlimited || st.CurrentLimit == nil {
			continue
		}
		if st.LimitRemaining < least {
			pick, least = st, st.LimitRemaining
		}
		if st.Code == pb.RateLimitResponse_OVER_LIMIT {
			pick, least = st, 0
		}
	}
	if pick == nil {
		return nil
	}
	return []*corev3.HeaderValue{
		{Key: HeaderLimit, Value: strconv.FormatUint(uint64(pick.CurrentLimit.RequestsPerUnit), 10)},
		{Key: HeaderRemaining, Value: strconv.FormatUint(uint64(pick.LimitRemaining), 10)},
		{Key: HeaderReset, Value: strconv.FormatInt(httpfields.CeilSeconds(pick.DurationUntilReset.AsDuration()), 10)},
	}
}

// The response headers of Options.ResponseHeaders, named as
// envoyproxy/ratelimit names them by default.
const (
	HeaderLimit     = "RateLimit-Limit"
	HeaderRemaining = "RateLimit-Remaining"
	HeaderReset     = "RateLimit-Reset"
)
