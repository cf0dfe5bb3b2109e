package edge

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Defaults of BreakerOptions.
const (
	DefaultFailures   = 5
	DefaultBackoff    = 500 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// BreakerOptions configure a Breaker. The zero value means defaults.
type BreakerOptions struct {
	// Failures is the number of consecutive failed store calls that open
	// the breaker. Must be >= 0. Zero means DefaultFailures (5).
	Failures int
	// Backoff is how long the breaker stays open after it opens, before it
	// lets one probe through. Each failed probe doubles it, up to
	// MaxBackoff. Every wait is shortened by a random jitter of up to a
	// quarter, so processes that lost the same store do not probe it in
	// step. Must be >= 0. Zero means DefaultBackoff (500ms).
	Backoff time.Duration
	// MaxBackoff caps the back-off. Must be >= Backoff once defaulted.
	// Zero means DefaultMaxBackoff (5s), or Backoff if that is longer.
	MaxBackoff time.Duration
	// Name labels the store in log lines, such as "redis". Default "store".
	Name string
	// Logger receives one line per state change: opened, probe failed,
	// closed. Default: nothing is logged.
	Logger *slog.Logger
	// Now reads the clock. It must be safe for concurrent use. Default
	// time.Now.
	Now func() time.Time
}

// BreakerState is the state of a Breaker.
type BreakerState int32

// The states of a Breaker.
const (
	// BreakerClosed: store calls go through. The normal state.
	BreakerClosed BreakerState = iota
	// BreakerOpen: the store is failing; no call is made until the
	// back-off has passed.
	BreakerOpen
	// BreakerProbing: the back-off has passed and one call, the probe, is
	// in flight; every other check is decided without the store until it
	// returns.
	BreakerProbing
)

var breakerStateNames = [...]string{"closed", "open", "probing"}

// String returns "closed", "open" or "probing".
func (s BreakerState) String() string {
	if int(s) >= 0 && int(s) < len(breakerStateNames) {
		return breakerStateNames[s]
	}
	return fmt.Sprintf("BreakerState(%d)", s)
}

// BreakerStats is a snapshot of a Breaker's state and counters. Counters
// only grow.
type BreakerStats struct {
	State BreakerState
	// Failures is the current number of consecutive failed calls.
	Failures int64
	// Opens counts the times the breaker opened from closed.
	Opens uint64
	// Probes counts the probes let through; FailedProbes those that failed
	// and reopened the breaker.
	Probes, FailedProbes uint64
}

// A Breaker stops calls to a store that keeps failing. It is shared by every
// Guard in front of the same store, so an outage seen by one zone spares the
// store the calls of all the others. It starts no goroutine: its state
// changes when a Guard asks it or reports to it. It is safe for concurrent
// use.
type Breaker struct {
	threshold           int64
	backoff, maxBackoff time.Duration
	name                string
	log                 *slog.Logger
	now                 func() time.Time

	state    atomic.Int32 // a BreakerState; read without mu on the hot path
	failures atomic.Int64 // consecutive failures

	mu       sync.Mutex // guards the transitions and the fields below
	until    time.Time  // end of the current back-off
	wait     time.Duration
	openedAt time.Time

	opens, probes, failedProbes atomic.Uint64
}

// NewBreaker returns a closed Breaker configured by opts.
func NewBreaker(opts BreakerOptions) (*Breaker, error) {
	switch {
	case opts.Failures < 0:
		return nil, fmt.Errorf("edge: %w: BreakerOptions.Failures must be >= 0, got %d", sluice.ErrInvalid, opts.Failures)
	case opts.Backoff < 0:
		return nil, fmt.Errorf("edge: %w: BreakerOptions.Backoff must be >= 0, got %v", sluice.ErrInvalid, opts.Backoff)
	case opts.MaxBackoff < 0:
		return nil, fmt.Errorf("edge: %w: BreakerOptions.MaxBackoff must be >= 0, got %v", sluice.ErrInvalid, opts.MaxBackoff)
	}
	b := &Breaker{
		threshold: int64(opts.Failures), backoff: opts.Backoff, maxBackoff: opts.MaxBackoff,
		name: opts.Name, log: opts.Logger, now: opts.Now,
	}
	if b.threshold == 0 {
		b.threshold = DefaultFailures
	}
	if b.backoff == 0 {
		b.backoff = DefaultBackoff
	}
	if b.maxBackoff == 0 {
		b.maxBackoff = max(DefaultMaxBackoff, b.backoff)
	}
	if b.maxBackoff < b.backoff {
		return nil, fmt.Errorf("edge: %w: BreakerOptions.MaxBackoff (%v) must be >= Backoff (%v)", sluice.ErrInvalid, b.maxBackoff, b.backoff)
	}
	if b.name == "" {
		b.name = "store"
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.now == nil {
		b.now = time.Now
	}
	return b, nil
}

// State returns the breaker's current state.
func (b *Breaker) State() BreakerState { return BreakerState(b.state.Load()) }

// Stats returns a snapshot of the breaker's state and counters.
func (b *Breaker) Stats() BreakerStats {
	return BreakerStats{
		State:        b.State(),
		Failures:     b.failures.Load(),
		Opens:        b.opens.Load(),
		Probes:       b.probes.Load(),
		FailedProbes: b.failedProbes.Load(),
	}
}

// allow reports whether a store call may be made now, and whether that call
// is the probe. A probe must be followed by exactly one of success, failure
// or release.
func (b *Breaker) allow() (ok, probe bool) {
	if b.State() == BreakerClosed {
		return true, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.State() {
	case BreakerClosed:
		return true, false
	case BreakerOpen:
		if b.now().Before(b.until) {
			return false, false
		}
		b.state.Store(int32(BreakerProbing))
		b.probes.Add(1)
		return true, true
	}
	return false, false // probing: one probe at a time
}

// success reports a store call that answered. Any answer closes the
// breaker, whether or not the call was the probe.
func (b *Breaker) success() {
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if b.State() == BreakerClosed {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.State() == BreakerClosed {
		return
	}
	b.state.Store(int32(BreakerClosed))
	b.log.Info("edge: store is back; breaker closed",
		"store", b.name, "outage", b.now().Sub(b.openedAt), "probes", b.probes.Load())
}

// failure reports a store call that failed with err.
func (b *Breaker) failure(probe bool, err error) {
	n := b.failures.Add(1)
	if !probe && (n < b.threshold || b.State() != BreakerClosed) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	switch {
	case probe && b.State() == BreakerProbing:
		b.failedProbes.Add(1)
		b.wait = min(2*b.wait, b.maxBackoff)
		b.reopen(now)
		b.log.Warn("edge: store probe failed; breaker stays open",
			"store", b.name, "error", err, "backoff", b.until.Sub(now), "outage", now.Sub(b.openedAt))
	case !probe && b.State() == BreakerClosed:
		b.opens.Add(1)
		b.openedAt, b.wait = now, b.backoff
		b.reopen(now)
		b.log.Warn("edge: store failing; breaker opened, checks are decided without it",
			"store", b.name, "failures", n, "error", err, "backoff", b.until.Sub(now))
	}
}

// reopen starts a back-off of b.wait less a random jitter of up to a
// quarter. b.mu must be held.
func (b *Breaker) reopen(now time.Time) {
	wait := b.wait
	if q := wait / 4; q > 0 {
		wait -= rand.N(q + 1)
	}
	b.until = now.Add(wait)
	b.state.Store(int32(BreakerOpen))
}

// release reports a probe that ended with neither an answer nor a store
// failure (bad input, the caller's context ended): the next call may probe
// at once.
func (b *Breaker) release(probe bool) {
	if !probe {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.State() == BreakerProbing {
		b.state.Store(int32(BreakerOpen))
	}
}
