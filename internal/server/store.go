package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

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
	// Stats, when set, reports store gauges for /metrics (the memory
	// store's key count and evictions).
	Stats func() memstore.Stats
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
		return &Store{Limiter: s, Stats: s.Stats}, nil
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
	breaker  *edge.Breaker
	policies map[config.FailurePolicy]*policyChain
}

// policyChain is the limiter of one failure policy.
type policyChain struct {
	limiter sluice.Limiter
	guard   *edge.Guard
	cache   *edge.DenyCache
}

func newBackend(store *Store, cfg config.Store, m *metrics, log *slog.Logger) (*backend, error) {
	timed := &timedLimiter{next: store.Limiter, hist: m.storeDuration}
	b := &backend{store: store, remote: cfg.Kind != config.Memory, policies: map[config.FailurePolicy]*policyChain{}}
	if !b.remote {
		for _, p := range []config.FailurePolicy{config.FailOpen, config.FailClosed, config.FailLocal} {
			b.policies[p] = &policyChain{limiter: timed}
		}
		return b, nil
	}
	var err error
	b.breaker, err = edge.NewBreaker(edge.BreakerOptions{Name: string(cfg.Kind), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	for _, p := range []config.FailurePolicy{config.FailOpen, config.FailClosed, config.FailLocal} {
		policy, err := edge.ParsePolicy(string(p))
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		g, err := edge.NewGuard(timed, edge.GuardOptions{Policy: policy, Timeout: cfg.Timeout, Breaker: b.breaker, Name: "policy " + string(p), Logger: log})
		if err != nil {
			return nil, fmt.Errorf("server: failure policy %s: %w", p, err)
		}
		dc, err := edge.NewDenyCache(g, edge.DenyCacheOptions{})
		if err != nil {
			return nil, fmt.Errorf("server: deny cache: %w", err)
		}
		b.policies[p] = &policyChain{limiter: dc, guard: g, cache: dc}
	}
	return b, nil
}

// strictness orders failure policies: a check over zones with different
// policies uses the strictest.
var strictness = map[config.FailurePolicy]int{config.FailOpen: 0, config.FailLocal: 1, config.FailClosed: 2}

func (b *backend) limiter(policies ...config.FailurePolicy) sluice.Limiter {
	strictest := config.FailOpen
	for _, p := range policies {
		if strictness[p] > strictness[strictest] {
			strictest = p
		}
	}
	return b.policies[strictest].limiter
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

// close releases the store.
func (b *backend) close() error {
	if b.store.Close == nil {
		return nil
	}
	return b.store.Close()
}
