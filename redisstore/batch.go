package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxInFlight is the most batch calls a Store has under way at once.
// While they are, new checks queue up and the next free call takes them
// together: batches grow with the load and cost no waiting when it is
// light (no timer).
const maxInFlight = 4

// pending is one check waiting for a batch call. done receives exactly one
// value; it is buffered so that a worker never blocks on a caller that gave
// up. deadline is when the check's Options.Timeout runs out: the batch call
// carrying it gets its batch's earliest deadline, so no check needs a timer
// of its own.
type pending struct {
	call     call
	deadline time.Time
	done     chan batchResult
}

type batchResult struct {
	reply checkReply
	err   error
}

// coalescer queues single-call checks and decides them in batch calls
// (batch.lua), at most maxBatch checks per call and, in a Cluster, one call
// per hash slot. It starts a worker goroutine per busy lane only while
// there is work: an idle Store runs no goroutine.
type coalescer struct {
	s        *Store
	maxBatch int

	// free recycles the pendings whose reply was received, with their
	// channel: one allocation fewer per check. A pending whose caller gave
	// up is never put back, as the worker may still send on it.
	free sync.Pool

	mu      sync.Mutex
	idle    sync.Cond // signalled when workers falls to 0
	queue   []*pending
	workers int
	closed  bool
}

func newCoalescer(s *Store, maxBatch int) *coalescer {
	q := &coalescer{s: s, maxBatch: maxBatch}
	q.idle.L = &q.mu
	q.free.New = func() any { return &pending{done: make(chan batchResult, 1)} }
	return q
}

// close refuses new checks and waits until every queued one is decided.
func (q *coalescer) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for q.workers > 0 {
		q.idle.Wait()
	}
}

// do queues cl and waits for its reply, or for ctx. The wait needs no
// timer of its own: the batch call that carries cl ends by deadline (see
// run), and the calls ahead of it by earlier deadlines.
func (q *coalescer) do(ctx context.Context, cl call, deadline time.Time) (checkReply, error) {
	p := q.free.Get().(*pending)
	p.call, p.deadline = cl, deadline
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		q.free.Put(p)
		return checkReply{}, errClosed
	}
	q.queue = append(q.queue, p)
	start := q.workers < maxInFlight
	if start {
		q.workers++
	}
	q.mu.Unlock()
	if start {
		go q.work()
	}
	select {
	case r := <-p.done:
		p.call = call{}
		q.free.Put(p)
		return r.reply, r.err
	case <-ctx.Done():
		// The check may still be decided by the batch already sent, as a
		// call that times out may still run on the server.
		return checkReply{}, ctx.Err()
	}
}

// work takes batches off the queue until it is empty.
func (q *coalescer) work() {
	for {
		q.mu.Lock()
		n := min(len(q.queue), q.maxBatch)
		if n == 0 {
			if q.workers--; q.workers == 0 {
				q.idle.Broadcast()
			}
			q.mu.Unlock()
			return
		}
		batch := make([]*pending, n)
		copy(batch, q.queue)
		rest := copy(q.queue, q.queue[n:])
		clear(q.queue[rest:])
		q.queue = q.queue[:rest]
		q.mu.Unlock()
		q.runBySlot(batch)
	}
}

// runBySlot sends one batch call per hash slot (one outside a Cluster),
// concurrently.
func (q *coalescer) runBySlot(batch []*pending) {
	if !q.s.cluster {
		q.run(batch)
		return
	}
	bySlot := map[uint16][]*pending{}
	for _, p := range batch {
		bySlot[p.call.slot] = append(bySlot[p.call.slot], p)
	}
	var wg sync.WaitGroup
	for _, group := range bySlot {
		wg.Go(func() { q.run(group) })
	}
	wg.Wait()
}

// run decides batch with one batch.lua call and hands each check its
// reply. The call's deadline is its checks' earliest, so that each check
// is bounded by its own Timeout (a check queued later is cut short by at
// most the time it queued behind). A check whose deadline passed in the
// queue (Redis slower than Timeout) fails at once and is not sent, so that
// it cannot cut short the others.
func (q *coalescer) run(batch []*pending) {
	batch = dropExpired(batch, time.Now())
	if len(batch) == 0 {
		return
	}
	keys, args := batchArgs(batch, q.s.padding)
	deadline := batch[0].deadline
	for _, p := range batch[1:] {
		if p.deadline.Before(deadline) {
			deadline = p.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	raw, err := run(ctx, q.s.sc, q.s.scripts.batch, keys, args)
	off := 0
	for _, p := range batch {
		var r batchResult
		if r.err = err; err == nil {
			r.reply, r.err = decodeBatchPart(raw, &off, len(p.call.hits))
		}
		p.done <- r
	}
}

// dropExpired answers the checks of batch whose deadline is not after now
// with context.DeadlineExceeded, as their own timer would have, and
// returns the others (in place).
func dropExpired(batch []*pending, now time.Time) []*pending {
	live := batch[:0]
	for _, p := range batch {
		if !now.Before(p.deadline) {
			p.done <- batchResult{err: context.DeadlineExceeded}
			continue
		}
		live = append(live, p)
	}
	return live
}

// batchArgs builds batch.lua's KEYS and ARGV from each check's check.lua
// ARGV (now, cost, id, padding, then five per hit).
func batchArgs(batch []*pending, padding string) (keys, args []string) {
	nk, na := 0, 2
	for _, p := range batch {
		nk, na = nk+len(p.call.keys), na+len(p.call.args)
	}
	keys, args = make([]string, 0, nk), make([]string, 0, na)
	args = append(args, padding, strconv.Itoa(len(batch)))
	for _, p := range batch {
		cl := p.call
		keys = append(keys, cl.keys...)
		args = append(args, cl.args[0], cl.args[1], cl.args[2], strconv.Itoa(len(cl.hits)))
		args = append(args, cl.args[checkHead:]...)
	}
	return keys, args
}

// decodeBatchPart decodes the compact reply of the check starting at
// raw[*off] (see batch.lua) and moves *off past it.
func decodeBatchPart(raw []string, off *int, n int) (checkReply, error) {
	end := *off + 1 + n
	if end > len(raw) {
		return checkReply{}, fmt.Errorf("batch script replied %d values, too few for its checks", len(raw))
	}
	part := raw[*off:end]
	*off = end
	if part[0] == "E" {
		return checkReply{}, fmt.Errorf("batch script: %s", part[1])
	}
	var p parser
	r := checkReply{allowed: p.flag(part[0]), hits: make([]hitReply, n)}
	for i, s := range part[1:] {
		var f [4]string
		if !splitFields(s, f[:]) {
			return checkReply{}, fmt.Errorf("batch script hit reply %q: want 4 fields", s)
		}
		used, reset := p.float(f[1]), p.int(f[3])
		r.hits[i] = hitReply{fits: p.flag(f[0]), used: used, usedAfter: used, retry: p.int(f[2]), reset: reset, resetAf: reset}
	}
	if p.err != nil {
		return checkReply{}, fmt.Errorf("batch script reply %q: %w", part, p.err)
	}
	return r, nil
}

// splitFields splits s at its spaces into exactly len(f) fields, as
// strings.SplitN(s, " ", len(f)) would but without allocating, and
// reports whether there were that many.
func splitFields(s string, f []string) bool {
	for i := range len(f) - 1 {
		var ok bool
		if f[i], s, ok = strings.Cut(s, " "); !ok {
			return false
		}
	}
	f[len(f)-1] = s
	return true
}

// errClosed is the error of a check on a closed Store.
var errClosed = errors.New("the store is closed")

// checkOne decides a check of one call with one check.lua call.
func (s *Store) checkOne(ctx context.Context, cl call) (checkReply, error) {
	raw, err := run(ctx, s.sc, s.scripts.check, cl.keys, cl.args)
	if err != nil {
		return checkReply{}, err
	}
	return decodeCheck(raw, len(cl.hits))
}
