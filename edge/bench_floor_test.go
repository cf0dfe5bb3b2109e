package edge_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
)

// A floorLimiter is the least a process can do that admits each check
// locally and counts it in Redis afterwards: no table, no view, no bound,
// no clock read, never a denial. Check appends the key to a queue; one
// goroutine sends the queue as pipelines of floorBatch commands, one
// command per check. It is not a limiter. It is the floor under every
// first-sight design that counts each new key in Redis: what
// that costs Redis per decision, and how many decisions per second the
// process and Redis together can make on this machine, with the process's
// own work near nothing.
//
// write is the command a check costs Redis:
//
//   - "setnx": SET key state NX PX ttl, what a first-sight record of a
//     sliding window writes today (a key of its own, with its expiry);
//   - "hincrby": HINCRBY of the key's field in one hash per window, the
//     cheapest write found that adds a count under a key's name (no key
//     or expiry per key: the hash expires as a whole), which a layout
//     keeping first-sight counts outside the key's own state would use;
//     each pipeline also sets the hash's expiry.
//
// Keys and hashes expire after two windows, as a sliding window's state.
type floorLimiter struct {
	client rueidis.Client
	write  string
	window time.Duration
	mu     sync.Mutex
	queue  []string // keys not yet sent
	room   *sync.Cond
	wake   chan struct{}
	done   chan struct{}
	closed bool
	err    error
}

// floorBatch is the commands per pipeline (the first-sight table's batch);
// floorQueue is the most keys queued before callers wait for the sender,
// so that decisions/s cannot run ahead of what Redis absorbs.
const (
	floorBatch = 512
	floorQueue = 64 * floorBatch
)

func newFloorLimiter(client rueidis.Client, write string, window time.Duration) *floorLimiter {
	f := &floorLimiter{client: client, write: write, window: window, wake: make(chan struct{}, 1), done: make(chan struct{})}
	f.room = sync.NewCond(&f.mu)
	go f.send()
	return f
}

func (f *floorLimiter) Check(_ context.Context, c sluice.Check, d *sluice.Decision) error {
	f.mu.Lock()
	for len(f.queue) >= floorQueue && !f.closed {
		f.room.Wait()
	}
	f.queue = append(f.queue, c.Hits[0].Key)
	n := len(f.queue)
	f.mu.Unlock()
	if n >= floorBatch {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
	d.Allowed = true
	return nil
}

// send sends the queue until Close, then what is left.
func (f *floorLimiter) send() {
	defer close(f.done)
	val := "abcdefghijklmnopqrstuvwx" // a sliding window's 24-byte state
	var cmds rueidis.Commands
	for {
		f.mu.Lock()
		for len(f.queue) < floorBatch && !f.closed {
			f.mu.Unlock()
			<-f.wake
			f.mu.Lock()
		}
		keys := f.queue
		f.queue = make([]string, 0, floorBatch)
		closed := f.closed
		f.room.Broadcast()
		f.mu.Unlock()
		for len(keys) > 0 {
			chunk := keys[:min(len(keys), floorBatch)]
			keys = keys[len(chunk):]
			cmds = cmds[:0]
			ttl := 2 * f.window.Milliseconds()
			hash := "sluice:first:{z}:" + strconv.FormatInt(time.Now().UnixMilli()/f.window.Milliseconds(), 10)
			for _, k := range chunk {
				name := "sluice:z{" + k + "}:w" + strconv.FormatInt(f.window.Microseconds(), 10)
				if f.write == "hincrby" {
					cmds = append(cmds, f.client.B().Hincrby().Key(hash).Field(name).Increment(1).Build())
				} else {
					cmds = append(cmds, f.client.B().Set().Key(name).Value(val).Nx().PxMilliseconds(ttl).Build())
				}
			}
			if f.write == "hincrby" {
				cmds = append(cmds, f.client.B().Pexpire().Key(hash).Milliseconds(ttl).Build())
			}
			for _, r := range f.client.DoMulti(context.Background(), cmds...) {
				if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) && f.err == nil {
					f.err = err
				}
			}
		}
		if closed {
			return
		}
	}
}

// Close sends what is queued and returns the first write that failed.
func (f *floorLimiter) Close() error {
	f.mu.Lock()
	f.closed = true
	f.room.Broadcast()
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	<-f.done
	return f.err
}

// Reset is not part of the floor.
func (f *floorLimiter) Reset(context.Context, sluice.Check) error { return errors.ErrUnsupported }

var _ sluice.Limiter = (*floorLimiter)(nil)
