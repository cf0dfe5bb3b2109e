package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

// metrics are the server's Prometheus metrics, on a registry of its own.
type metrics struct {
	reg           *prometheus.Registry
	checks        *prometheus.CounterVec
	degraded      *prometheus.CounterVec
	badState      *prometheus.CounterVec
	storeDuration *prometheus.HistogramVec
	reloads       *prometheus.CounterVec
	proxyErrors   prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_checks_total",
			Help: "Checks decided, by zone and result (allowed, denied, shadow_denied, error). A check over several zones counts once in each.",
		}, []string{"zone", "result"}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_degraded_decisions_total",
			Help: "Checks decided without the store because it failed, by zone and source (fail-open, fail-closed, fallback).",
		}, []string{"zone", "source"}),
		badState: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_bad_state_checks_total",
			Help: "Checks that failed on bad stored state (data that is not sluice's under one of their keys) and were decided by the failure policy, by zone and source (fail-open, fail-closed, fallback). The store was healthy: not counted in sluice_degraded_decisions_total or by the breaker.",
		}, []string{"zone", "source"}),
		storeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_store_duration_seconds",
			Help:    "Latency of store calls, by operation (check, reset), errors included.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}, []string{"op"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_config_reloads_total",
			Help: "Configuration reloads, by result (ok, failed). A failed reload keeps the running configuration.",
		}, []string{"result"}),
		proxyErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_proxy_upstream_errors_total",
			Help: "Proxied requests that got no response from their upstream (answered 502).",
		}),
	}
	m.reg.MustRegister(m.checks, m.degraded, m.badState, m.storeDuration, m.reloads, m.proxyErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("failed")
	return m
}

// The results of sluice_checks_total, indexed by checkResult.
var checkResults = [...]string{"allowed", "denied", "shadow_denied", "error"}

func checkResult(d *sluice.Decision, err error) int {
	switch {
	case err != nil:
		return 3
	case !d.Allowed:
		return 1
	case d.Shadowed:
		return 2
	}
	return 0
}

// zoneCounters returns the zone's sluice_checks_total series, one per
// result, so the hot path does not look labels up.
func (m *metrics) zoneCounters(zone string) [len(checkResults)]prometheus.Counter {
	var cs [len(checkResults)]prometheus.Counter
	for i, r := range checkResults {
		cs[i] = m.checks.WithLabelValues(zone, r)
	}
	return cs
}

// observe counts one decision (or error) of a check over zones. bad says
// the check failed on bad stored state and d is the failure policy's
// decision (backend.settle): it counts in sluice_bad_state_checks_total,
// not as a decision without the store because the store failed.
func (m *metrics) observe(zones []*zone, d *sluice.Decision, err error, bad bool) {
	result := checkResult(d, err)
	for _, z := range zones {
		z.counters[result].Inc()
		switch {
		case err != nil || !d.Source.Degraded():
		case bad:
			m.badState.WithLabelValues(z.cfg.Name, d.Source.String()).Inc()
		default:
			m.degraded.WithLabelValues(z.cfg.Name, d.Source.String()).Inc()
		}
	}
}

// timedLimiter observes the latency of every call to the store.
type timedLimiter struct {
	next sluice.Limiter
	hist *prometheus.HistogramVec
}

func (t *timedLimiter) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	start := time.Now()
	err := t.next.Check(ctx, c, d)
	t.hist.WithLabelValues("check").Observe(time.Since(start).Seconds())
	return err
}

// RecordBatch passes an async zone's first-sight records to the store when
// it records in batches (the Redis store does; see edge.BatchRecorder).
func (t *timedLimiter) RecordBatch(ctx context.Context, checks []sluice.Check, recorded []int64, created []bool) error {
	r, ok := t.next.(edge.BatchRecorder)
	if !ok {
		return fmt.Errorf("server: the store does not record in batches: %w", errors.ErrUnsupported)
	}
	start := time.Now()
	err := r.RecordBatch(ctx, checks, recorded, created)
	t.hist.WithLabelValues("record").Observe(time.Since(start).Seconds())
	return err
}

func (t *timedLimiter) Reset(ctx context.Context, c sluice.Check) error {
	start := time.Now()
	err := t.next.Reset(ctx, c)
	t.hist.WithLabelValues("reset").Observe(time.Since(start).Seconds())
	return err
}

// edgeCollector exports the counters of the backend's breaker, guards,
// deny caches and memory store, read at scrape time.
type edgeCollector struct {
	b *backend
}

var (
	descBreakerState  = prometheus.NewDesc("sluice_store_breaker_open", "1 while the store breaker (in a Redis Cluster, any master's) is open or probing, 0 while closed.", nil, nil)
	descBreakerOpens  = prometheus.NewDesc("sluice_store_breaker_opens_total", "Times the store breaker (in a Redis Cluster, any master's) opened.", nil, nil)
	descNodeOpen      = prometheus.NewDesc("sluice_store_node_breaker_open", "1 while the breaker of a Redis Cluster master is open or probing, 0 while closed, by the master's address.", []string{"node"}, nil)
	descNodeOpens     = prometheus.NewDesc("sluice_store_node_breaker_opens_total", "Times the breaker of a Redis Cluster master opened, by the master's address.", []string{"node"}, nil)
	descNodeErrors    = prometheus.NewDesc("sluice_store_node_errors_total", "Store calls to a Redis Cluster master that failed (unreachable or timed out), by the master's address.", []string{"node"}, nil)
	descNodeSkipped   = prometheus.NewDesc("sluice_store_node_skipped_total", "Checks of a Redis Cluster master's keys decided without calling the store because its breaker was open, by the master's address.", []string{"node"}, nil)
	descStoreErrors   = prometheus.NewDesc("sluice_store_errors_total", "Store calls that failed (unreachable or timed out), by failure policy.", []string{"policy"}, nil)
	descStoreTimeouts = prometheus.NewDesc("sluice_store_timeouts_total", "Store calls that timed out, by failure policy.", []string{"policy"}, nil)
	descSkipped       = prometheus.NewDesc("sluice_store_skipped_total", "Checks decided without calling the store because the breaker was open, by failure policy.", []string{"policy"}, nil)
	descDenyHits      = prometheus.NewDesc("sluice_deny_cache_hits_total", "Checks denied from the deny cache without the store, by failure policy.", []string{"policy"}, nil)
	descDenyEntries   = prometheus.NewDesc("sluice_deny_cache_entries", "Denials held in the deny cache, by failure policy.", []string{"policy"}, nil)
	descMemKeys       = prometheus.NewDesc("sluice_memstore_keys", "States held by the memory store.", nil, nil)
	descMemEvictions  = prometheus.NewDesc("sluice_memstore_evictions_total", "States the memory store dropped early because it was full.", nil, nil)
)

// The metrics of async zones, by failure policy and sync interval.
var (
	asyncLabels          = []string{"policy", "sync_interval", "processes", "first_sight"}
	descAsyncPending     = prometheus.NewDesc("sluice_async_pending_cost", "Cost admitted by async zones and not yet recorded by the store, summed over keys.", asyncLabels, nil)
	descAsyncKeys        = prometheus.NewDesc("sluice_async_keys", "Keys tracked by async zones.", asyncLabels, nil)
	descAsyncDecisions   = prometheus.NewDesc("sluice_async_decisions_total", "Checks of async zones, by path: local (from the view) or sync (passed to the store).", append(asyncLabels, "path"), nil)
	descAsyncFirstSight  = prometheus.NewDesc("sluice_async_first_sight_total", "Checks of async zones admitted locally on a key's first sight (first_sight), counted among the local decisions too.", asyncLabels, nil)
	descAsyncFlushes     = prometheus.NewDesc("sluice_async_flushes_total", "Flush rounds of async zones.", asyncLabels, nil)
	descAsyncFlushSecs   = prometheus.NewDesc("sluice_async_flush_seconds_total", "Time spent in flush rounds; divide by sluice_async_flushes_total for the mean latency.", asyncLabels, nil)
	descAsyncLastFlush   = prometheus.NewDesc("sluice_async_last_flush_seconds", "Length of the last flush round.", asyncLabels, nil)
	descAsyncFlushErrors = prometheus.NewDesc("sluice_async_flush_errors_total", "Flush calls that failed; their cost stays owed.", asyncLabels, nil)
	descAsyncViewAge     = prometheus.NewDesc("sluice_async_view_age_seconds", "Age of the oldest view in use, as of the last sweep (about once a second).", asyncLabels, nil)
	descAsyncDropped     = prometheus.NewDesc("sluice_async_dropped_cost_total", "Admitted cost never sent: owed for longer than its window, or at shutdown.", asyncLabels, nil)
	descAsyncUnrecorded  = prometheus.NewDesc("sluice_async_unrecorded_cost_total", "Admitted cost the store refused because the key was full: measured over-admission.", asyncLabels, nil)
)

func (e edgeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBreakerState, descBreakerOpens, descNodeOpen, descNodeOpens, descNodeErrors, descNodeSkipped, descStoreErrors, descStoreTimeouts, descSkipped, descDenyHits, descDenyEntries,
		descAsyncPending, descAsyncKeys, descAsyncDecisions, descAsyncFirstSight, descAsyncFlushes, descAsyncFlushSecs, descAsyncLastFlush, descAsyncFlushErrors, descAsyncViewAge, descAsyncDropped, descAsyncUnrecorded} {
		ch <- d
	}
}

// collectAsync exports the counters of the async zones' limiters.
func (e edgeCollector) collectAsync(ch chan<- prometheus.Metric) {
	e.b.amu.Lock()
	defer e.b.amu.Unlock()
	for k, a := range e.b.asyncs {
		s := a.Stats()
		l := []string{string(k.policy), k.interval.String(), strconv.Itoa(k.processes), strconv.FormatInt(k.firstSight, 10)}
		metric := func(d *prometheus.Desc, t prometheus.ValueType, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, t, v, append(l, extra...)...)
		}
		metric(descAsyncPending, prometheus.GaugeValue, float64(s.Pending))
		metric(descAsyncKeys, prometheus.GaugeValue, float64(s.Keys))
		metric(descAsyncDecisions, prometheus.CounterValue, float64(s.Local), "local")
		metric(descAsyncDecisions, prometheus.CounterValue, float64(s.Sync), "sync")
		metric(descAsyncFirstSight, prometheus.CounterValue, float64(s.FirstSight))
		metric(descAsyncFlushes, prometheus.CounterValue, float64(s.Flushes))
		metric(descAsyncFlushSecs, prometheus.CounterValue, s.FlushSeconds)
		metric(descAsyncLastFlush, prometheus.GaugeValue, s.LastFlush.Seconds())
		metric(descAsyncFlushErrors, prometheus.CounterValue, float64(s.FlushErrors))
		metric(descAsyncViewAge, prometheus.GaugeValue, s.ViewAge.Seconds())
		metric(descAsyncDropped, prometheus.CounterValue, float64(s.Dropped))
		metric(descAsyncUnrecorded, prometheus.CounterValue, float64(s.Unrecorded))
	}
}

func (e edgeCollector) Collect(ch chan<- prometheus.Metric) {
	e.collectAsync(ch)
	if e.b.breaker == nil {
		return
	}
	bs := e.b.breaker.Stats()
	open := 0.0
	if bs.State.String() != "closed" {
		open = 1
	}
	ch <- prometheus.MustNewConstMetric(descBreakerState, prometheus.GaugeValue, open)
	ch <- prometheus.MustNewConstMetric(descBreakerOpens, prometheus.CounterValue, float64(bs.Opens))
	for _, p := range e.b.breaker.Parts() {
		if p.Name == "" {
			continue // the store as a whole, in the two above
		}
		open := 0.0
		if p.State != edge.BreakerClosed {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(descNodeOpen, prometheus.GaugeValue, open, p.Name)
		ch <- prometheus.MustNewConstMetric(descNodeOpens, prometheus.CounterValue, float64(p.Opens), p.Name)
		ch <- prometheus.MustNewConstMetric(descNodeErrors, prometheus.CounterValue, float64(p.Errors), p.Name)
		ch <- prometheus.MustNewConstMetric(descNodeSkipped, prometheus.CounterValue, float64(p.Skipped), p.Name)
	}
	for p, chain := range e.b.policies {
		gs, cs := chain.guard.Stats(), chain.cache.Stats()
		ch <- prometheus.MustNewConstMetric(descStoreErrors, prometheus.CounterValue, float64(gs.StoreErrors), string(p))
		ch <- prometheus.MustNewConstMetric(descStoreTimeouts, prometheus.CounterValue, float64(gs.Timeouts), string(p))
		ch <- prometheus.MustNewConstMetric(descSkipped, prometheus.CounterValue, float64(gs.Skipped), string(p))
		ch <- prometheus.MustNewConstMetric(descDenyHits, prometheus.CounterValue, float64(cs.Hits), string(p))
		ch <- prometheus.MustNewConstMetric(descDenyEntries, prometheus.GaugeValue, float64(cs.Entries), string(p))
	}
}
