package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/redisstore"
)

// Ready means ready: a server with a Redis store reports ready (/readyz,
// gRPC health) only once it has connected to the store and loaded its
// scripts (a warm-up peek that reaches every node), and a check that
// arrives before waits for that, up to the store timeout, before it goes
// to the store through its failure policy, rather than being the call
// that pays for the connection and the scripts and failing open because
// they took longer than the timeout. A Redis that does not answer at
// start is waited for in the background: the server listens, is not
// ready, and decides checks by their failure policy until it answers.

// warmProbeKeys is the number of keys of the warm-up peek: enough hash
// slots that every master of a Cluster of a few shards holds one of them
// (the chance that 64 random slots miss one master of 3 is 3 × (2/3)^64,
// about 10^-11), so that every node's connection is made and its scripts
// are loaded.
const warmProbeKeys = 64

// warmTimeout bounds one warm-up attempt, at least the store timeout:
// connecting and loading scripts may take longer than a check may.
const warmTimeout = 2 * time.Second

// readiness is whether the store is warm. Safe for concurrent use.
type readiness struct {
	ok    atomic.Bool
	done  chan struct{} // closed when ok
	mu    sync.Mutex
	hooks []func()
}

func newReadiness() *readiness { return &readiness{done: make(chan struct{})} }

// set makes r ready and runs the hooks, once.
func (r *readiness) set() {
	r.mu.Lock()
	if r.ok.Load() {
		r.mu.Unlock()
		return
	}
	r.ok.Store(true)
	close(r.done)
	hooks := r.hooks
	r.hooks = nil
	r.mu.Unlock()
	for _, h := range hooks {
		h()
	}
}

// onReady runs f when r becomes ready, or now if it is.
func (r *readiness) onReady(f func()) {
	r.mu.Lock()
	if !r.ok.Load() {
		r.hooks = append(r.hooks, f)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	f()
}

// wait returns when r is ready, after timeout, or when ctx ends.
func (r *readiness) wait(ctx context.Context, timeout time.Duration) {
	if r.ok.Load() {
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// warmGate is a limiter in front of a failure policy's Guard that waits,
// until the store is warm, up to the store timeout before passing a call
// on.
type warmGate struct {
	next    *edge.Guard
	r       *readiness
	timeout time.Duration
}

var _ edge.BatchRecorder = warmGate{}

func (g warmGate) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	g.r.wait(ctx, g.timeout)
	return g.next.Check(ctx, c, d)
}

func (g warmGate) Reset(ctx context.Context, c sluice.Check) error {
	g.r.wait(ctx, g.timeout)
	return g.next.Reset(ctx, c)
}

func (g warmGate) RecordBatch(ctx context.Context, checks []sluice.Check, recorded []int64, created []bool) error {
	g.r.wait(ctx, g.timeout)
	return g.next.RecordBatch(ctx, checks, recorded, created)
}

// lateStore is a Redis store that did not answer at start: it is dialed
// again by the warm-up until it does. Until then every call fails with
// sluice.ErrUnavailable, and the failure policies decide.
type lateStore struct {
	url  string
	opts redisstore.Options
	s    atomic.Pointer[redisstore.Store]

	mu     sync.Mutex
	closed bool
}

var _ edge.BatchRecorder = (*lateStore)(nil)

var errNotConnected = fmt.Errorf("server: store not connected yet: %w", sluice.ErrUnavailable)

func (l *lateStore) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if s := l.s.Load(); s != nil {
		return s.Check(ctx, c, d)
	}
	return errNotConnected
}

func (l *lateStore) Reset(ctx context.Context, c sluice.Check) error {
	if s := l.s.Load(); s != nil {
		return s.Reset(ctx, c)
	}
	return errNotConnected
}

func (l *lateStore) RecordBatch(ctx context.Context, checks []sluice.Check, recorded []int64, created []bool) error {
	if s := l.s.Load(); s != nil {
		return s.RecordBatch(ctx, checks, recorded, created)
	}
	return errNotConnected
}

// dial connects, unless connected or closed.
func (l *lateStore) dial() error {
	if l.s.Load() != nil {
		return nil
	}
	s, err := redisstore.Dial(l.url, l.opts)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		s.Close()
		return errors.New("server: store closed")
	}
	l.s.Store(s)
	return nil
}

func (l *lateStore) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if s := l.s.Load(); s != nil {
		return s.Close()
	}
	return nil
}

// openLateStore returns the store of cfg (a Redis store) that did not
// answer at start, to be dialed by the warm-up.
func openLateStore(cfg config.Store, log *slog.Logger) *Store {
	l := &lateStore{url: storeURL(cfg), opts: redisstore.Options{Prefix: cfg.Prefix, Timeout: cfg.Timeout, Logger: log}}
	return &Store{Limiter: l, Close: l.close, late: l}
}

// warm connects the store (if it did not answer at start) and loads its
// scripts, retrying with a back-off until it succeeds or ctx ends; then
// the server is ready. New makes the first attempt, so that a server
// whose Redis answers is ready when New returns.
func (s *Server) warm(ctx context.Context) {
	start := time.Now()
	backoff := 50 * time.Millisecond
	for attempt := 2; ; attempt++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
		if s.warmOnce(ctx, start, attempt) == nil {
			s.ready.set()
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// warmOnce makes one warm-up attempt, and logs its outcome.
func (s *Server) warmOnce(ctx context.Context, start time.Time, attempt int) error {
	err := s.backend.warmUp(ctx, max(warmTimeout, s.running.Store.Timeout))
	if err == nil {
		s.log.Info("store ready: connected, scripts loaded", "after", time.Since(start).Round(time.Millisecond).String(), "attempts", attempt)
		return nil
	}
	if ok, suppressed := s.storeLogs.allow(); ok && ctx.Err() == nil {
		s.log.Warn("store not ready yet; checks are decided by their failure policy", "error", err.Error(), "attempt", attempt, "suppressed", suppressed)
	}
	return err
}

// warmUp dials a late store, then peeks warmProbeKeys reserved keys
// directly (past the failure policies), sluice.MaxHits a check, which
// loads the decision script on every node they reach.
func (b *backend) warmUp(ctx context.Context, timeout time.Duration) error {
	if l := b.store.late; l != nil {
		if err := l.dial(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hits := make([]sluice.Hit, sluice.MaxHits)
	var d sluice.Decision
	for n := 0; n < warmProbeKeys; n += len(hits) {
		for i := range hits {
			hits[i] = sluice.Hit{Zone: "sluice-readyz", Key: "warm-" + strconv.Itoa(n+i), Limit: sluice.Limit{Rate: 1, Window: time.Second}}
		}
		if err := b.store.Limiter.Check(ctx, sluice.Check{Hits: hits}, &d); err != nil {
			return err
		}
	}
	return nil
}
