package edge

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
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
	// the breaker. Calls in flight together that fail together count as
	// one: each failure counted is of a call begun after the one before
	// it failed. Must be >= 0. Zero means DefaultFailures (5).
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
	// Parts, when set, splits the store into parts that fail alone, such
	// as the masters of a Redis Cluster: the breaker keeps a state of its
	// own for each part, so the failures of one part's calls open that
	// part alone and the checks of the others still go to the store.
	// Default: nil, one state for the whole store.
	Parts Partitioner
}

// A Partitioner is a store made of parts that fail alone, such as the
// masters of a Redis Cluster (redisstore.Store is one). Its methods must be
// cheap, as Part runs on every check, and safe for concurrent use.
type Partitioner interface {
	// Part returns the name of the part that decides c, such as a node's
	// address, or "" when c needs several parts or its part is not known
	// yet: such checks share the state of the store as a whole. c is not
	// validated yet (it may have no hits). A name is shown in logs and
	// metrics, so it must not contain keys.
	Part(c sluice.Check) string
	// Parts returns the names of the parts the store has now. A Breaker
	// forgets the state of a part that is no longer among them (a failed
	// node replaced by another).
	Parts() []string
}

// MaxBreakerParts bounds the parts a Breaker keeps a state for. A part
// past it, which a Partitioner that keeps its parts few never names, shares
// the state of the store as a whole.
const MaxBreakerParts = 1024

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

// BreakerStats is a snapshot of a Breaker's state and counters, or of one
// part's. Counters only grow; a Breaker's count the events of all its
// parts, those it forgot included.
type BreakerStats struct {
	// State is the state of the part, or for the whole Breaker the worst
	// of its parts' (open, then probing, then closed).
	State BreakerState
	// Failures is the current number of consecutive failed calls (for the
	// whole Breaker, summed over its parts).
	Failures int64
	// Opens counts the times the breaker opened from closed.
	Opens uint64
	// Probes counts the probes let through; FailedProbes those that failed
	// and reopened the breaker.
	Probes, FailedProbes uint64
	// Errors counts the store calls that failed (reported by a Guard as
	// an outage); Skipped the calls not made because the breaker was
	// open or probing.
	Errors, Skipped uint64
}

// PartStats is the state and counters of one part of a Breaker (see
// BreakerOptions.Parts).
type PartStats struct {
	// Name is the part's name, as its Partitioner gave it; "" is the store
	// as a whole.
	Name string
	BreakerStats
}

// A Breaker stops calls to a store that keeps failing. It is shared by every
// Guard in front of the same store, so an outage seen by one zone spares the
// store the calls of all the others. With BreakerOptions.Parts it keeps
// one state per part of the store (a Redis Cluster's masters), so a part
// that fails stops only the calls of the checks it decides. It starts no
// goroutine: its state changes when a Guard asks it or reports to it. It is
// safe for concurrent use.
type Breaker struct {
	threshold           int64
	backoff, maxBackoff time.Duration
	name                string
	log                 *slog.Logger
	now                 func() time.Time
	parter              Partitioner

	whole breakerPart // the store as a whole: every check without Parts
	parts sync.Map    // part name → *breakerPart
	pmu   sync.Mutex  // serialises adding and forgetting parts
	count int         // parts in parts; guarded by pmu

	// The counters of every part: a forgotten part's stay counted.
	opens, probes, failedProbes, errors, skipped atomic.Uint64
}

// breakerPart is the state of one part of a store: the whole of it, or
// one of the parts a Partitioner names.
type breakerPart struct {
	b    *Breaker
	name string

	state    atomic.Int32 // a BreakerState; read without mu on the hot path
	failures atomic.Int64 // consecutive failures
	// wave counts every failure counted towards the threshold: read as a
	// call begins, it tells a failure of a call that was in flight
	// together with one already counted.
	wave atomic.Uint64

	mu       sync.Mutex // guards the transitions and the fields below
	until    time.Time  // end of the current back-off
	wait     time.Duration
	openedAt time.Time

	opens, probes, failedProbes, errors, skipped atomic.Uint64
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
		name: opts.Name, log: opts.Logger, now: opts.Now, parter: opts.Parts,
	}
	b.whole.b = b
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

// State returns the breaker's current state: with parts, the worst of
// theirs (open, then probing, then closed).
func (b *Breaker) State() BreakerState { return b.Stats().State }

// Stats returns a snapshot of the breaker's state and counters: with
// parts, the worst state of those it holds now, the sum of their
// consecutive failures, and the counts of every part's events.
func (b *Breaker) Stats() BreakerStats {
	if b.parter == nil {
		return b.whole.stats()
	}
	sum := BreakerStats{Opens: b.opens.Load(), Probes: b.probes.Load(), FailedProbes: b.failedProbes.Load(),
		Errors: b.errors.Load(), Skipped: b.skipped.Load()}
	for _, p := range b.Parts() {
		sum.State = worse(sum.State, p.State)
		sum.Failures += p.Failures
	}
	return sum
}

// worse returns the worse of two states: open, then probing, then closed.
func worse(a, b BreakerState) BreakerState {
	rank := func(s BreakerState) int { return [...]int{0, 2, 1}[s] }
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// Parts returns the state and counters of each part, sorted by name; the
// store as a whole comes first (Name ""). It first forgets the parts that
// the Partitioner no longer names. Without BreakerOptions.Parts it returns
// the whole store alone.
func (b *Breaker) Parts() []PartStats {
	out := []PartStats{{BreakerStats: b.whole.stats()}}
	if b.parter == nil {
		return out
	}
	b.pmu.Lock()
	b.prune()
	b.pmu.Unlock()
	b.parts.Range(func(_, v any) bool {
		p := v.(*breakerPart)
		out = append(out, PartStats{Name: p.name, BreakerStats: p.stats()})
		return true
	})
	slices.SortFunc(out[1:], func(x, y PartStats) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// prune forgets the parts the Partitioner no longer names. b.pmu must be
// held.
func (b *Breaker) prune() {
	current := map[string]bool{}
	for _, name := range b.parter.Parts() {
		current[name] = true
	}
	b.parts.Range(func(k, _ any) bool {
		if !current[k.(string)] {
			b.parts.Delete(k)
			b.count--
		}
		return true
	})
}

// part returns the state of the part that decides c.
func (b *Breaker) part(c sluice.Check) *breakerPart {
	if b.parter == nil {
		return &b.whole
	}
	name := b.parter.Part(c)
	if name == "" {
		return &b.whole
	}
	if p, ok := b.parts.Load(name); ok {
		return p.(*breakerPart)
	}
	b.pmu.Lock()
	defer b.pmu.Unlock()
	if p, ok := b.parts.Load(name); ok {
		return p.(*breakerPart)
	}
	if b.count >= MaxBreakerParts {
		b.prune()
		if b.count >= MaxBreakerParts {
			return &b.whole
		}
	}
	p := &breakerPart{b: b, name: name}
	b.parts.Store(name, p)
	b.count++
	return p
}

func (p *breakerPart) stats() BreakerStats {
	return BreakerStats{
		State:        BreakerState(p.state.Load()),
		Failures:     p.failures.Load(),
		Opens:        p.opens.Load(),
		Probes:       p.probes.Load(),
		FailedProbes: p.failedProbes.Load(),
		Errors:       p.errors.Load(),
		Skipped:      p.skipped.Load(),
	}
}

// logAttrs are the attributes naming the part in log lines.
func (p *breakerPart) logAttrs(attrs ...any) []any {
	attrs = append([]any{"store", p.b.name}, attrs...)
	if p.name != "" {
		attrs = append(attrs, "node", p.name)
	}
	return attrs
}

// allow reports whether a store call may be made now, and whether that call
// is the probe. A probe must be followed by exactly one of success, failure
// or release.
func (p *breakerPart) allow() (ok, probe bool) {
	if BreakerState(p.state.Load()) == BreakerClosed {
		return true, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch BreakerState(p.state.Load()) {
	case BreakerClosed:
		return true, false
	case BreakerOpen:
		if !p.b.now().Before(p.until) {
			p.state.Store(int32(BreakerProbing))
			p.probes.Add(1)
			p.b.probes.Add(1)
			return true, true
		}
	}
	// Open, or probing: one probe at a time.
	p.skipped.Add(1)
	p.b.skipped.Add(1)
	return false, false
}

// success reports a store call that answered. Any answer closes the
// breaker, whether or not the call was the probe.
func (p *breakerPart) success() {
	if p.failures.Load() != 0 {
		p.failures.Store(0)
	}
	if BreakerState(p.state.Load()) == BreakerClosed {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if BreakerState(p.state.Load()) == BreakerClosed {
		return
	}
	p.state.Store(int32(BreakerClosed))
	p.b.log.Info("edge: store is back; breaker closed",
		p.logAttrs("outage", p.b.now().Sub(p.openedAt), "probes", p.probes.Load())...)
}

// failure reports a store call that failed with err; wave is p.wave as the
// call began. Calls in flight together fail together (the checks of one
// pipelined batch, or of a node that stalled for a moment): only the first
// of them to report counts towards the threshold, so that it counts failed
// calls one after another, not how many checks shared a failure. A single
// slow answer of a healthy node then costs one failure, whatever the load.
func (p *breakerPart) failure(probe bool, wave uint64, err error) {
	p.errors.Add(1)
	p.b.errors.Add(1)
	if !probe && !p.wave.CompareAndSwap(wave, wave+1) {
		return
	}
	n := p.failures.Add(1)
	if !probe && (n < p.b.threshold || BreakerState(p.state.Load()) != BreakerClosed) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.b.now()
	switch state := BreakerState(p.state.Load()); {
	case probe && state == BreakerProbing:
		p.failedProbes.Add(1)
		p.b.failedProbes.Add(1)
		p.wait = min(2*p.wait, p.b.maxBackoff)
		p.reopen(now)
		p.b.log.Warn("edge: store probe failed; breaker stays open",
			p.logAttrs("error", err, "backoff", p.until.Sub(now), "outage", now.Sub(p.openedAt))...)
	case !probe && state == BreakerClosed:
		p.opens.Add(1)
		p.b.opens.Add(1)
		p.openedAt, p.wait = now, p.b.backoff
		p.reopen(now)
		p.b.log.Warn("edge: store failing; breaker opened, checks are decided without it",
			p.logAttrs("failures", n, "error", err, "backoff", p.until.Sub(now))...)
	}
}

// reopen starts a back-off of p.wait less a random jitter of up to a
// quarter. p.mu must be held.
func (p *breakerPart) reopen(now time.Time) {
	wait := p.wait
	if q := wait / 4; q > 0 {
		wait -= rand.N(q + 1)
	}
	p.until = now.Add(wait)
	p.state.Store(int32(BreakerOpen))
}

// release reports a probe that ended with neither an answer nor a store
// failure (bad input, the caller's context ended): the next call may probe
// at once.
func (p *breakerPart) release(probe bool) {
	if !probe {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if BreakerState(p.state.Load()) == BreakerProbing {
		p.state.Store(int32(BreakerOpen))
	}
}
