package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// Defaults of GuardOptions.
const (
	DefaultTimeout         = sluice.DefaultTimeout // 50ms, the one default of every store call
	DefaultLogInterval     = 10 * time.Second
	DefaultFallbackMaxKeys = 100_000
)

// FailClosedRetryAfter is the RetryAfter of a check denied by PolicyClosed:
// the store said nothing about the hits, so the wait is a guess, long
// enough to spare a failing store a client's immediate retries and short
// enough to notice its return.
const FailClosedRetryAfter = time.Second

// errBreakerOpen is the cause of a decision taken while the breaker is open.
var errBreakerOpen = fmt.Errorf("%w: breaker open, store not called", sluice.ErrUnavailable)

// GuardOptions configure a Guard. The zero value means defaults.
type GuardOptions struct {
	// Policy decides checks the store cannot. Default PolicyOpen.
	Policy Policy
	// Timeout bounds every store call: the call gets a context that ends
	// after Timeout, or earlier with the caller's. A call that has not
	// answered by then counts as a store failure, so callers should not
	// pass deadlines much shorter than Timeout. Must be >= 0; zero means
	// DefaultTimeout (50ms).
	Timeout time.Duration
	// Breaker is the breaker of the store. Guards in front of the same
	// store (one per zone, say) should share one, so an outage seen by one
	// spares the store the calls of all. Default: a Breaker of its own with
	// default options, logging to Logger, and with the store as its
	// Partitioner when the store is one (see BreakerOptions.Parts).
	Breaker *Breaker
	// Fallback decides checks under PolicyLocal; other policies ignore it.
	// Default: a memstore.Store of at most DefaultFallbackMaxKeys (100,000)
	// keys.
	Fallback sluice.Limiter
	// Name labels the guard in log lines, such as the zone's name. Default
	// empty.
	Name string
	// Logger receives the degraded decisions, at most one line per
	// LogInterval (the line counts those it stands for). Default: nothing
	// is logged.
	Logger *slog.Logger
	// LogInterval is the shortest time between two log lines about
	// degraded decisions. Must be >= 0; zero means DefaultLogInterval
	// (10s).
	LogInterval time.Duration
	// Now reads the clock for LogInterval. It must be safe for concurrent
	// use. Default time.Now.
	Now func() time.Time
}

// GuardStats is a snapshot of a Guard's counters. Counters only grow.
type GuardStats struct {
	// FailOpen, FailClosed and Fallback count the decisions taken without
	// the store, by Source.
	FailOpen, FailClosed, Fallback uint64
	// StoreErrors counts store calls that failed: sluice.ErrUnavailable or
	// no answer within Timeout (Timeouts counts the latter), and calls not
	// made because MaxAbandoned calls were still pending.
	StoreErrors, Timeouts uint64
	// Skipped counts checks decided without calling the store because the
	// breaker was open.
	Skipped uint64
	// Abandoned is the number of store calls given up on at their deadline
	// that have not returned yet (a gauge, at most MaxAbandoned).
	Abandoned int64
}

// Degraded returns the number of decisions taken without the store.
func (s GuardStats) Degraded() uint64 { return s.FailOpen + s.FailClosed + s.Fallback }

// A Guard is a sluice.Limiter in front of a store that applies a timeout to
// every store call, a Breaker, and a failure Policy: when the store cannot
// decide, the Guard does, and the Decision's Source says how. It is safe for
// concurrent use and needs no closing: it starts no background goroutine,
// only one per store call while the store is failing (see the package
// doc).
type Guard struct {
	store    sluice.Limiter
	policy   Policy
	timeout  time.Duration
	breaker  *Breaker
	fallback sluice.Limiter
	name     string
	log      *slog.Logger
	logs     throttle

	calls     sync.Pool // of *call
	abandoned atomic.Int64

	failOpen, failClosed, fallbacks atomic.Uint64
	storeErrors, timeouts, skipped  atomic.Uint64
}

var _ sluice.Limiter = (*Guard)(nil)

// NewGuard returns a Guard in front of store, configured by opts.
func NewGuard(store sluice.Limiter, opts GuardOptions) (*Guard, error) {
	if err := opts.validate(store); err != nil {
		return nil, err
	}
	g := &Guard{
		store: store, policy: opts.Policy, timeout: opts.Timeout, breaker: opts.Breaker,
		fallback: opts.Fallback, name: opts.Name, log: opts.Logger,
		logs: throttle{every: opts.LogInterval, now: opts.Now},
	}
	g.calls.New = func() any { return &detachedCall{g: g, done: make(chan error, 1)} }
	if g.timeout == 0 {
		g.timeout = DefaultTimeout
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.logs.every == 0 {
		g.logs.every = DefaultLogInterval
	}
	if g.logs.now == nil {
		g.logs.now = time.Now
	}
	if g.breaker == nil {
		parts, _ := store.(Partitioner)
		b, err := NewBreaker(BreakerOptions{Logger: g.log, Now: opts.Now, Parts: parts})
		if err != nil {
			return nil, err
		}
		g.breaker = b
	}
	if g.fallback == nil && g.policy == PolicyLocal {
		m, err := memstore.New(memstore.Options{MaxKeys: DefaultFallbackMaxKeys})
		if err != nil {
			return nil, fmt.Errorf("edge: fallback: %w", err)
		}
		g.fallback = m
	}
	return g, nil
}

func (o GuardOptions) validate(store sluice.Limiter) error {
	switch {
	case store == nil:
		return fmt.Errorf("edge: %w: NewGuard needs a store", sluice.ErrInvalid)
	case !o.Policy.valid():
		return fmt.Errorf("edge: %w: unknown failure policy %v", sluice.ErrInvalid, o.Policy)
	case o.Timeout < 0:
		return fmt.Errorf("edge: %w: GuardOptions.Timeout must be >= 0, got %v", sluice.ErrInvalid, o.Timeout)
	case o.LogInterval < 0:
		return fmt.Errorf("edge: %w: GuardOptions.LogInterval must be >= 0, got %v", sluice.ErrInvalid, o.LogInterval)
	}
	return nil
}

// Breaker returns the guard's breaker, to read its state (a readiness probe)
// or its Stats.
func (g *Guard) Breaker() *Breaker { return g.breaker }

// Policy returns the guard's failure policy.
func (g *Guard) Policy() Policy { return g.policy }

// Stats returns a snapshot of the guard's counters.
func (g *Guard) Stats() GuardStats {
	return GuardStats{
		FailOpen: g.failOpen.Load(), FailClosed: g.failClosed.Load(), Fallback: g.fallbacks.Load(),
		StoreErrors: g.storeErrors.Load(), Timeouts: g.timeouts.Load(), Skipped: g.skipped.Load(),
		Abandoned: g.abandoned.Load(),
	}
}

// Check implements sluice.Limiter. It asks the store unless the breaker is
// open. When the store fails (sluice.ErrUnavailable, or no answer before the
// deadline: the timeout's or the caller's, whichever comes first), the check
// is decided by the policy and Check returns nil with a degraded d.Source.
// Any other error (bad input, the caller's context canceled, or done before
// the call) is returned as is: it is not an outage.
func (g *Guard) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("edge: check: %w", err)
	}
	p := g.breaker.part(c)
	ok, probe := p.allow()
	if !ok {
		g.skipped.Add(1)
		return g.degrade(ctx, c, d, p, errBreakerOpen)
	}
	wave := p.wave.Load()
	sctx, cancel := g.withTimeout(ctx)
	err := g.storeCall(sctx, p, probe, c, d, false)
	cancel()
	if outage, err := g.report(ctx, p, probe, wave, err); !outage {
		return err
	}
	return g.degrade(ctx, c, d, p, err)
}

// Reset implements sluice.Limiter: it resets the hits in the store and, under
// PolicyLocal, in the fallback. While the breaker is open, or when the store
// fails, it returns an error that wraps sluice.ErrUnavailable: a reset
// cannot be decided by a policy.
func (g *Guard) Reset(ctx context.Context, c sluice.Check) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("edge: reset: %w", err)
	}
	if g.fallback != nil && g.policy == PolicyLocal {
		if err := g.fallback.Reset(ctx, c); err != nil {
			return fmt.Errorf("edge: reset: fallback: %w", err)
		}
	}
	p := g.breaker.part(c)
	ok, probe := p.allow()
	if !ok {
		g.skipped.Add(1)
		return fmt.Errorf("edge: reset: %w", errBreakerOpen)
	}
	wave := p.wave.Load()
	sctx, cancel := g.withTimeout(ctx)
	err := g.storeCall(sctx, p, probe, c, nil, true)
	cancel()
	if _, err = g.report(ctx, p, probe, wave, err); err != nil {
		return fmt.Errorf("edge: reset: %w", err)
	}
	return nil
}

// withTimeout returns the context of one store call: ctx, ended after the
// guard's timeout. When ctx already ends sooner it is used as is, which
// saves a timer per call.
func (g *Guard) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= g.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, g.timeout)
}

// report tells the breaker's part p how a store call went (wave: p.wave as
// the call began). It returns
// whether the call failed because of the store (an outage) and the call's
// error, made to wrap sluice.ErrUnavailable on an outage (so a timeout
// reads as one too).
// Only ErrUnavailable and a deadline are store failures: the store did not
// answer in the time it had, whether the deadline was the guard's timeout or
// the caller's own, sooner one. A caller that canceled went away; the store
// is not to blame.
func (g *Guard) report(ctx context.Context, p *breakerPart, probe bool, wave uint64, err error) (outage bool, _ error) {
	if err == nil {
		p.success()
		return false, nil
	}
	timeout := errors.Is(err, context.DeadlineExceeded)
	canceled := errors.Is(ctx.Err(), context.Canceled)
	if canceled || !(timeout || errors.Is(err, sluice.ErrUnavailable)) {
		p.release(probe)
		return false, err
	}
	g.storeErrors.Add(1)
	p.failure(probe, wave, err)
	if timeout {
		g.timeouts.Add(1)
		if !errors.Is(err, sluice.ErrUnavailable) {
			err = fmt.Errorf("%w: no answer within %v: %w", sluice.ErrUnavailable, g.timeout, err)
		}
	}
	return true, err
}

// degrade decides c without the store, by the policy. cause is why the
// store was not used and p the breaker's part of c, for the log.
func (g *Guard) degrade(ctx context.Context, c sluice.Check, d *sluice.Decision, p *breakerPart, cause error) error {
	// Bad input is an error whether or not the store is up.
	if err := c.Validate(); err != nil {
		return fmt.Errorf("edge: check: %w", err)
	}
	switch g.policy {
	case PolicyOpen:
		d.Degrade(sluice.FromFailOpen, true, 0)
		g.failOpen.Add(1)
	case PolicyClosed:
		d.Degrade(sluice.FromFailClosed, false, FailClosedRetryAfter)
		g.failClosed.Add(1)
	case PolicyLocal:
		// The fallback answers in microseconds; the caller's deadline may
		// have passed while the store was silent, and still wants an answer.
		if err := g.fallback.Check(context.WithoutCancel(ctx), c, d); err != nil {
			return fmt.Errorf("edge: check: fallback: %w", err)
		}
		d.Source = sluice.FromFallback
		g.fallbacks.Add(1)
	}
	g.logDegraded(d.Source, p, cause)
	return nil
}

// logDegraded logs a degraded decision, at most once per LogInterval.
func (g *Guard) logDegraded(source sluice.Source, p *breakerPart, cause error) {
	ok, suppressed := g.logs.allow()
	if !ok {
		return
	}
	attrs := []any{"guard", g.name, "policy", g.policy.String(), "source", source.String(),
		"error", cause.Error(), "breaker", BreakerState(p.state.Load()).String(),
		"suppressed", suppressed}
	if p.name != "" {
		attrs = append(attrs, "node", p.name)
	}
	g.log.Warn("edge: check decided without the store", attrs...)
}

// RecordBatch implements BatchRecorder when the store does (the Redis store
// does): records pass under the breaker and within the timeout, as a check,
// and a store that fails counts against the breaker. While the breaker is
// open it returns an error wrapping sluice.ErrUnavailable without calling
// the store; with a store that does not record in batches, one wrapping
// errors.ErrUnsupported.
func (g *Guard) RecordBatch(ctx context.Context, checks []sluice.Check, recorded []int64, created []bool) error {
	r, ok := g.store.(BatchRecorder)
	if !ok {
		return errNoBatch
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("edge: record: %w", err)
	}
	p := &g.breaker.whole
	ok, probe := p.allow()
	if !ok {
		g.skipped.Add(1)
		return fmt.Errorf("edge: record: %w", errBreakerOpen)
	}
	wave := p.wave.Load()
	sctx, cancel := g.withTimeout(ctx)
	err := r.RecordBatch(sctx, checks, recorded, created)
	cancel()
	if _, err = g.report(ctx, p, probe, wave, err); err != nil {
		return fmt.Errorf("edge: record: %w", err)
	}
	return nil
}
