package rls

import (
	"errors"
	"sync"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
)

// MaxMetricValues bounds the rule labels that carry a request value's
// digest (detailed_metric, value_to_metric), over all domains, for the
// life of the service: clients choose those values (Envoy copies them from
// request headers), so without a bound every new value would be a new
// series. Past it, a descriptor is counted under its rule's configured
// path (such as "api_key" or "path_/v1/*") and in
// sluice_rls_metric_values_overflow_total. The labels take at most about
// MaxMetricValues times the longest descriptor path of the rule files.
const MaxMetricValues = 1000

// metrics are the service's Prometheus metrics. Their labels are bounded:
// a domain label is a configured domain (or "unknown"), a rule label a
// descriptor path of the files or, where a descriptor sets detailed_metric
// or value_to_metric, one with the digests of the request's values (never
// the values), at most MaxMetricValues of those.
type metrics struct {
	requests    *prometheus.CounterVec
	descriptors *prometheus.CounterVec
	degradedVec *prometheus.CounterVec
	badStateVec *prometheus.CounterVec
	overflow    *prometheus.CounterVec
	oversized   *prometheus.CounterVec

	// mu guards detailed, the rule labels with request values so far
	// (domain, NUL, label).
	mu       sync.RWMutex
	detailed map[string]struct{}
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rls_requests_total",
			Help: "ShouldRateLimit requests (gRPC and /json), by domain and code (ok, over_limit, error).",
		}, []string{"domain", "code"}),
		descriptors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rls_descriptors_total",
			Help: "Request descriptors that matched a limit, by domain, rule (the descriptor path, as envoyproxy/ratelimit's stat key) and result (ok, over_limit, shadow_over_limit, unlimited).",
		}, []string{"domain", "rule", "result"}),
		degradedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rls_degraded_decisions_total",
			Help: "ShouldRateLimit checks decided without the store because it failed, by domain and source (fail-open, fail-closed, fallback).",
		}, []string{"domain", "source"}),
		badStateVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rls_bad_state_checks_total",
			Help: "ShouldRateLimit checks that failed on bad stored state (data that is not sluice's under one of their keys) and were decided by the failure policy, by domain and source (fail-open, fail-closed, fallback). The store was healthy: not counted as degraded or by the breaker.",
		}, []string{"domain", "source"}),
		overflow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rls_metric_values_overflow_total",
			Help: "Descriptors counted under their rule's configured path, without their value's digest, because detailed_metric and value_to_metric labels had reached their bound (rls.MaxMetricValues), by domain.",
		}, []string{"domain"}),
		oversized: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rls_oversized_requests_total",
			Help: "ShouldRateLimit requests with more than rls.MaxLimitedDescriptors descriptors with a limit, answered OVER_LIMIT without the store, by domain.",
		}, []string{"domain"}),
		detailed: map[string]struct{}{},
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	return errors.Join(r.Register(m.requests), r.Register(m.descriptors), r.Register(m.degradedVec), r.Register(m.badStateVec), r.Register(m.overflow), r.Register(m.oversized))
}

func (m *metrics) request(d *Domain, resp *pb.RateLimitResponse, err error) {
	domain := "unknown"
	if d != nil {
		domain = d.Name
	}
	code := "error"
	switch {
	case err != nil:
	case resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT:
		code = "over_limit"
	default:
		code = "ok"
	}
	m.requests.WithLabelValues(domain, code).Inc()
}

// descriptor counts a matched descriptor's result under its rule label.
func (m *metrics) descriptor(domain string, mt *match, result string) {
	m.descriptors.WithLabelValues(domain, m.rule(domain, mt), result).Inc()
}

// rule is the rule label of a match: its metric path, or, for a path with
// a request value's digest once MaxMetricValues such labels exist, the
// rule's configured path.
func (m *metrics) rule(domain string, mt *match) string {
	if !mt.detailed {
		return mt.metric
	}
	id := domain + "\x00" + mt.metric
	m.mu.RLock()
	_, ok := m.detailed[id]
	m.mu.RUnlock()
	if ok {
		return mt.metric
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.detailed[id]; ok || len(m.detailed) < MaxMetricValues {
		m.detailed[id] = struct{}{}
		return mt.metric
	}
	m.overflow.WithLabelValues(domain).Inc()
	return mt.rule.metric
}

func (m *metrics) degraded(domain, source string) {
	m.degradedVec.WithLabelValues(domain, source).Inc()
}

// badState counts a check that failed on bad stored state, decided by the
// failure policy from source.
func (m *metrics) badState(domain, source string) {
	m.badStateVec.WithLabelValues(domain, source).Inc()
}
