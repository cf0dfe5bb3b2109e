package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
)

// Store is an opened store: the limiter and how to release it.
type Store struct {
	// Limiter decides checks.
	Limiter sluice.Limiter
	// Close releases the store's connections; nil when there is nothing to
	// release.
	Close func() error
	// Metrics, when set, collects the store's own metrics for /metrics,
	// such as the memory store's key count and evictions. The server
	// registers it next to its own. Default nil: none.
	Metrics prometheus.Collector

	// late is the Redis store that did not answer at start, which the
	// server's warm-up dials (ready.go); nil otherwise.
	late *lateStore
}

// OpenStore opens the store a configuration's store section describes:
// the memory store, or a Redis store (standalone, Sentinel or Cluster)
// that it connects to. It is the one place where a store is constructed
// from configuration. log receives what the store cannot return, such as
// a failed refund.
func OpenStore(cfg config.Store, log *slog.Logger) (*Store, error) {
	if cfg.Kind == config.Memory || cfg.Kind == "" {
		s, err := memstore.New(memstore.Options{MaxKeys: cfg.MaxKeys})
		if err != nil {
			return nil, fmt.Errorf("server: memory store: %w", err)
		}
		return &Store{Limiter: s, Metrics: memstoreCollector{s}}, nil
	}
	s, err := redisstore.Dial(storeURL(cfg), redisstore.Options{Prefix: cfg.Prefix, Timeout: cfg.Timeout, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("server: %s store: %w", cfg.Kind, err)
	}
	return &Store{Limiter: s, Close: s.Close}, nil
}

// storeURL is the URL redisstore opens for cfg: its URL, or one built
// from the sentinel or cluster fields.
func storeURL(cfg config.Store) string {
	if cfg.URL != "" {
		return cfg.URL
	}
	auth := ""
	if cfg.Password != "" {
		// Escaped, so a password with @, / or : cannot end the userinfo.
		auth = url.UserPassword("", cfg.Password).String() + "@"
	}
	if cfg.Kind == config.Sentinel {
		return "redis-sentinel://" + auth + strings.Join(cfg.SentinelAddrs, ",") + "/" + cfg.SentinelMaster
	}
	return "redis-cluster://" + auth + strings.Join(cfg.ClusterSeeds, ",")
}

// backend is the chain of limiters every check goes through, built once
// per server from the store: the store, timed for /metrics; then, for a
// remote store, one edge.Guard per failure policy sharing one breaker,
// each behind a deny cache. A memory store cannot be unreachable, so its
// checks go straight to it.
type backend struct {
	store    *Store
	remote   bool
	timed    sluice.Limiter // the store, timed for /metrics
	breaker  *edge.Breaker
	policies map[config.FailurePolicy]*policyChain
	// fallback decides, under the local policy, the checks of a remote
	// store that fails (in the local Guard) and the checks that fail on
	// bad stored state (settle); nil for a memory store.
	fallback *memstore.Store
	log      *slog.Logger

	// asyncs are the edge.Async limiters of async zones, one per failure
	// policy, sync interval, processes and first sight, made as zones ask; a reload
	// reuses them and closes those no zone uses any more.
	amu    sync.Mutex
	asyncs map[asyncKey]*edge.Async
	// closing counts the limiters retired by a reload still closing.
	closing sync.WaitGroup
}

type asyncKey struct {
	policy     config.FailurePolicy
	interval   time.Duration
	processes  int
	firstSight int64
}

// asyncKeyOf returns the key of z's async limiter.
func asyncKeyOf(z *config.Zone) asyncKey {
	return asyncKey{z.Failure, z.SyncInterval, z.Processes, z.FirstSight}
}

// policyChain is the limiter of one failure policy.
type policyChain struct {
	limiter sluice.Limiter
	guard   *edge.Guard
	gate    warmGate // in front of guard
	cache   *edge.DenyCache
}

// ready gates the remote store's checks until it is warm (warmGate).
func newBackend(store *Store, cfg config.Store, m *metrics, log *slog.Logger, ready *readiness) (*backend, error) {
	timed := &timedLimiter{next: store.Limiter, hist: m.storeDuration}
	b := &backend{store: store, remote: cfg.Kind != config.Memory, timed: timed, policies: map[config.FailurePolicy]*policyChain{}, log: log, asyncs: map[asyncKey]*edge.Async{}}
	if !b.remote {
		for _, p := range []config.FailurePolicy{config.FailOpen, config.FailClosed, config.FailLocal} {
			b.policies[p] = &policyChain{limiter: timed}
		}
		return b, nil
	}
	var err error
	// A Cluster store names the master of each check: one breaker state
	// per master, so a failing master degrades its own keys only.
	parts, _ := store.Limiter.(edge.Partitioner)
	b.breaker, err = edge.NewBreaker(edge.BreakerOptions{Name: string(cfg.Kind), Logger: log, Parts: parts})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if b.fallback, err = memstore.New(memstore.Options{MaxKeys: edge.DefaultFallbackMaxKeys}); err != nil {
		return nil, fmt.Errorf("server: fallback: %w", err)
	}
	for _, p := range []config.FailurePolicy{config.FailOpen, config.FailClosed, config.FailLocal} {
		policy, err := edge.ParsePolicy(string(p))
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		g, err := edge.NewGuard(timed, edge.GuardOptions{Policy: policy, Timeout: cfg.Timeout, Breaker: b.breaker, Fallback: b.fallback, Name: "policy " + string(p), Logger: log})
		if err != nil {
			return nil, fmt.Errorf("server: failure policy %s: %w", p, err)
		}
		gate := warmGate{next: g, r: ready, timeout: cfg.Timeout}
		dc, err := edge.NewDenyCache(gate, edge.DenyCacheOptions{})
		if err != nil {
			return nil, fmt.Errorf("server: deny cache: %w", err)
		}
		b.policies[p] = &policyChain{limiter: dc, guard: g, gate: gate, cache: dc}
	}
	return b, nil
}

// asyncCloseTimeout bounds how long closing the server waits for each
// async limiter to send what it owes.
const asyncCloseTimeout = 5 * time.Second

// strictness orders failure policies: a check over zones with different
// policies uses the strictest.
var strictness = map[config.FailurePolicy]int{config.FailOpen: 0, config.FailLocal: 1, config.FailClosed: 2}

// forget drops the denials of c's keys from every policy's deny cache,
// after a reset: a rule over zones of several policies checks through the
// strictest policy's cache, and an async zone resets past its cache, so the
// zone's own chain alone would leave a denial another cache still repeats.
func (b *backend) forget(c sluice.Check) {
	for _, p := range b.policies {
		if p.cache != nil {
			p.cache.Forget(c)
		}
	}
}

func (b *backend) limiter(policies ...config.FailurePolicy) sluice.Limiter {
	return b.policies[strictest(policies...)].limiter
}

// zoneLimiter returns the limiter of a zone's own checks: its policy's
// chain, behind an edge.Async when the zone is async. The Async asks the
// store through the policy's Guard, not its deny cache (whose answers are
// not the store's), so the zone's failure policy decides the checks it
// cannot decide from its views while the store fails. Its flushes go to
// the store itself: a flush that fails is sent again, so it is bounded by
// the Async's flush timeout, not the store timeout of checks, and its
// failures (a flush of 16 keys on a loaded machine) do not open the
// breaker that decides every check.
func (b *backend) zoneLimiter(z *config.Zone) sluice.Limiter {
	if z.Mode != config.AsyncMode {
		return b.limiter(z.Failure)
	}
	b.amu.Lock()
	defer b.amu.Unlock()
	k := asyncKeyOf(z)
	if a := b.asyncs[k]; a != nil {
		return a
	}
	chain := b.policies[z.Failure]
	var next sluice.Limiter = chain.limiter
	if chain.guard != nil {
		next = chain.gate
	}
	a, err := edge.NewAsync(next, edge.AsyncOptions{SyncInterval: z.SyncInterval, Processes: z.Processes, FirstSight: z.FirstSight, Flush: b.timed, Logger: b.log})
	if err != nil { // not with a validated configuration
		b.log.Error("async mode unavailable; the zone is synchronous", "zone", z.Name, "error", err.Error())
		return b.limiter(z.Failure)
	}
	b.asyncs[k] = a
	return a
}

// retire closes, in the background, the async limiters that no zone of
// st uses any more (a reload changed their zones' sync interval,
// processes or policy, or removed them), after sending what they owe.
// Checks still running on the previous configuration go to the store.
func (b *backend) retire(st *state) {
	used := map[asyncKey]bool{}
	for _, z := range st.zones {
		if z.cfg.Mode == config.AsyncMode {
			used[asyncKeyOf(z.cfg)] = true
		}
	}
	b.amu.Lock()
	defer b.amu.Unlock()
	for k, a := range b.asyncs {
		if used[k] {
			continue
		}
		delete(b.asyncs, k)
		b.closing.Add(1)
		go func() {
			defer b.closing.Done()
			ctx, cancel := context.WithTimeout(context.Background(), asyncCloseTimeout)
			defer cancel()
			if err := a.Close(ctx); err != nil {
				b.log.Warn("async zone: pending cost not sent", "policy", string(k.policy), "sync_interval", k.interval.String(), "error", err.Error())
			}
		}()
	}
}

// probe asks the store itself, bypassing the failure policies, whether it
// answers: a peek of one throwaway key within the store timeout.
func (b *backend) probe(ctx context.Context, timeout time.Duration) error {
	if !b.remote {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := sluice.Check{Hits: []sluice.Hit{{Zone: "sluice-readyz", Key: "probe", Limit: sluice.Limit{Rate: 1, Window: time.Second}}}}
	var d sluice.Decision
	return b.store.Limiter.Check(ctx, c, &d)
}

// close sends what the async zones owe, then releases the store.
func (b *backend) close() error {
	b.amu.Lock()
	for k, a := range b.asyncs {
		ctx, cancel := context.WithTimeout(context.Background(), asyncCloseTimeout)
		if err := a.Close(ctx); err != nil {
			b.log.Warn("async zone: pending cost not sent", "policy", string(k.policy), "sync_interval", k.interval.String(), "error", err.Error())
		}
		cancel()
	}
	b.amu.Unlock()
	b.closing.Wait()
	if b.store.Close == nil {
		return nil
	}
	return b.store.Close()
}

// memstoreCollector is the memory store's Store.Metrics.
type memstoreCollector struct{ s *memstore.Store }

func (m memstoreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descMemKeys
	ch <- descMemEvictions
}

func (m memstoreCollector) Collect(ch chan<- prometheus.Metric) {
	st := m.s.Stats()
	ch <- prometheus.MustNewConstMetric(descMemKeys, prometheus.GaugeValue, float64(st.Keys))
	ch <- prometheus.MustNewConstMetric(descMemEvictions, prometheus.CounterValue, float64(st.Evictions))
}
