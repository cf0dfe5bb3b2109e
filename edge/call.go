package edge

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// MaxAbandoned bounds, per Guard, the store calls given up on at their
// deadline that have not returned yet. Past it the Guard does not call the
// store (each new call would only add a goroutine waiting on a store that
// does not answer) and counts a store failure instead.
const MaxAbandoned = 1024

// The states of a call.
const (
	running int32 = iota
	finished
	abandoned
)

// storeCall runs one Check (or Reset) on the store under ctx. While the
// store is healthy it is called on the caller's goroutine, which costs
// nothing. Once a call of p (c's part of the store) has failed, and until
// one succeeds (and always for the probe), each call of p runs detached,
// on its own goroutine, so that the Guard returns at the deadline even if
// the store does not: a Redis client may block past its context while it
// reconnects to a server that accepts connections and never answers (we
// saw rueidis do so for about a second).
func (g *Guard) storeCall(ctx context.Context, p *breakerPart, probe bool, c sluice.Check, d *sluice.Decision, reset bool) error {
	switch {
	case probe || p.failures.Load() > 0:
		return g.detached(ctx, c, d, reset)
	case reset:
		return g.store.Reset(ctx, c)
	}
	return g.store.Check(ctx, c, d)
}

// A detachedCall is one detached store call. It works on its own copies of the
// check and the decision, so one abandoned at the deadline never touches
// the caller's. Calls are pooled; an abandoned one goes back to the pool
// when the store finally returns.
type detachedCall struct {
	g     *Guard
	reset bool
	c     sluice.Check    // Hits owned by the call
	d     sluice.Decision // Hits owned by the call
	state atomic.Int32
	done  chan error // buffered: run never blocks on it
}

// detached runs one Check (or Reset) on the store, on its own goroutine,
// and returns its error, or ctx's when ctx ends first. On success of a
// Check, d holds the store's decision.
func (g *Guard) detached(ctx context.Context, c sluice.Check, d *sluice.Decision, reset bool) error {
	if g.abandoned.Load() >= MaxAbandoned {
		return fmt.Errorf("edge: %w: %d store calls still running past their deadline", sluice.ErrUnavailable, MaxAbandoned)
	}
	k := g.calls.Get().(*detachedCall)
	hits := k.c.Hits[:0] // the call's own storage, not the caller's
	k.reset, k.c = reset, c
	k.c.Hits = append(hits, c.Hits...)
	k.state.Store(running)
	go k.run(ctx)
	select {
	case err := <-k.done:
		return g.finish(k, d, err)
	case <-ctx.Done():
	}
	if !k.state.CompareAndSwap(running, abandoned) {
		return g.finish(k, d, <-k.done) // it finished at the deadline
	}
	g.abandoned.Add(1)
	return fmt.Errorf("edge: store call abandoned: %w", ctx.Err())
}

// finish copies the decision of a finished call to d and pools the call.
func (g *Guard) finish(k *detachedCall, d *sluice.Decision, err error) error {
	if err == nil && !k.reset {
		hits := d.Hits
		*d = k.d
		d.Hits = append(hits[:0], k.d.Hits...)
	}
	g.calls.Put(k)
	return err
}

// run makes the store call and hands its error to the waiting caller, or,
// if the caller has gone, returns the call to the pool.
func (k *detachedCall) run(ctx context.Context) {
	var err error
	if k.reset {
		err = k.g.store.Reset(ctx, k.c)
	} else {
		err = k.g.store.Check(ctx, k.c, &k.d)
	}
	if k.state.CompareAndSwap(running, finished) {
		k.done <- err
		return
	}
	k.g.abandoned.Add(-1)
	k.g.calls.Put(k)
}
