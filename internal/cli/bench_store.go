package cli

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/server"
)

// Direct use of a store, without a server: bench -store, and check and
// reset with -redis. The hits are built the way the server builds them
// (Hit.Zone is the zone's name), so with the zone's name, limits and
// algorithm and the server's key prefix, check and reset reach the very
// state a server's zone uses.

// directLimits parses the limits of a direct check, all with algorithm.
func directLimits(spec, algorithm string) ([]sluice.Limit, error) {
	limits, err := sluice.ParseLimits(spec)
	if err != nil {
		return nil, err
	}
	a, err := sluice.ParseAlgorithm(algorithm)
	if err != nil {
		return nil, err
	}
	for i := range limits {
		limits[i].Algorithm = a
	}
	return limits, nil
}

// openStore opens the store named by target: "memory" or a Redis URL
// (redis://, rediss://, redis-sentinel://, redis-cluster://), through
// server.OpenStore, the one place a store is built. close releases it.
func openStore(target, prefix string, timeout time.Duration) (store sluice.Limiter, close func() error, err error) {
	cfg := config.Store{Kind: config.Memory}
	if target != "memory" {
		if !strings.HasPrefix(target, "redis") {
			return nil, nil, fmt.Errorf("%w: store %q: want memory or a Redis URL such as redis://127.0.0.1:6379", sluice.ErrInvalid, target)
		}
		cfg = config.Store{Kind: config.Redis, URL: target, Prefix: prefix, Timeout: timeout}
	}
	s, err := server.OpenStore(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	if s.Close == nil {
		return s.Limiter, func() error { return nil }, nil
	}
	return s.Limiter, s.Close, nil
}

// directCheck builds the check of keys in zone under limits.
func directCheck(zone string, keys []string, limits []sluice.Limit, cost int64) sluice.Check {
	c := sluice.Check{Cost: cost}
	for _, k := range keys {
		for _, l := range limits {
			c.Hits = append(c.Hits, sluice.Hit{Zone: zone, Key: k, Limit: l})
		}
	}
	return c
}

// decisionView renders a store's decision as the server's API would.
func decisionView(zone string, c sluice.Check, d *sluice.Decision) *apiDecision {
	v := &apiDecision{Allowed: d.Allowed, Zone: zone, Source: d.Source.String(), Shadowed: d.Shadowed,
		RetryAfter: d.RetryAfter().Seconds()}
	for i, h := range d.Hits {
		hit := c.Hits[i]
		v.Limits = append(v.Limits, apiHit{
			Key: hit.Key, Name: hit.Limit.Label(), Limit: hit.Limit.String(), Algorithm: string(hit.Limit.Algo()),
			Allowed: h.Allowed, Shadow: h.Shadow, Used: h.Used, Remaining: h.Remaining,
			RetryAfter: h.RetryAfter.Seconds(), ResetAfter: h.ResetAfter.Seconds(),
		})
	}
	return v
}
