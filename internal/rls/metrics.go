package rls

import (
	"errors"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus metrics. Their labels are bounded
// by the rule files: a domain label is a configured domain (or "unknown"),
// a rule label a descriptor path of the files, with request values only
// where a descriptor sets detailed_metric.
type metrics struct {
	requests    *prometheus.CounterVec
	descriptors *prometheus.CounterVec
	degradedVec *prometheus.CounterVec
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
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	return errors.Join(r.Register(m.requests), r.Register(m.descriptors), r.Register(m.degradedVec))
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

func (m *metrics) descriptor(domain, rule, result string) {
	m.descriptors.WithLabelValues(domain, rule, result).Inc()
}

func (m *metrics) degraded(domain, source string) {
	m.degradedVec.WithLabelValues(domain, source).Inc()
}
