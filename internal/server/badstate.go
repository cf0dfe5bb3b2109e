package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/config"
)

// settle decides a check that failed with sluice.ErrBadState (data that is
// not sluice's under one of its keys: the store is healthy, this check alone
// could not be decided) by policy, as the Guard decides a check the store
// could not: open allows it, closed denies it with edge.FailClosedRetryAfter,
// local asks the fallback the local Guard uses during an outage (closed when
// there is none). The store's breaker and its outage counters never see it;
// the caller counts it in sluice_bad_state_checks_total. Any other err is
// returned as is.
func (b *backend) settle(ctx context.Context, policy config.FailurePolicy, c sluice.Check, d *sluice.Decision, err error) error {
	if !errors.Is(err, sluice.ErrBadState) {
		return err
	}
	switch {
	case policy == config.FailOpen:
		d.Degrade(sluice.FromFailOpen, true, 0)
	case policy == config.FailLocal && b.fallback != nil:
		// The fallback answers in microseconds; a caller whose deadline
		// passed still wants an answer, as under an outage.
		if err := b.fallback.Check(context.WithoutCancel(ctx), c, d); err != nil {
			return fmt.Errorf("server: check: fallback: %w", err)
		}
		d.Source = sluice.FromFallback
	default:
		d.Degrade(sluice.FromFailClosed, false, edge.FailClosedRetryAfter)
	}
	return nil
}

// strictest returns the strictest of policies (open when there are none):
// a check over zones with different policies is decided by it.
func strictest(policies ...config.FailurePolicy) config.FailurePolicy {
	p := config.FailOpen
	for _, q := range policies {
		if strictness[q] > strictness[p] {
			p = q
		}
	}
	return p
}
