package redisstore

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Defaults of Options.
const (
	// DefaultPrefix starts every key the Store writes.
	DefaultPrefix = "sluice:"
	// DefaultTimeout bounds each call to Redis: sluice.DefaultTimeout.
	DefaultTimeout = sluice.DefaultTimeout
	// DefaultMaxBatch is the default Options.MaxBatch.
	DefaultMaxBatch = 64
	// DefaultMaxQueue is the default Options.MaxQueue: at the 50,000 to
	// 90,000 decisions/s the README's Redis table measured for one Redis
	// (2 shared cores), a full queue is 23 to 41 ms of work, less than
	// DefaultTimeout.
	DefaultMaxQueue = 2048
	// DefaultClockPadding is added to every TTL when Options.Now is set.
	DefaultClockPadding = 10 * time.Second
)

// Options configure a Store. The zero value is the defaults: every field
// has one.
type Options struct {
	// TLSConfig is used by Dial for rediss URLs. Default: nil, which verifies the
	// server against the system roots with the URL's host name.
	TLSConfig *tls.Config
	// Prefix starts every key. It must not contain "{" or "}". Default:
	// DefaultPrefix ("sluice:").
	Prefix string
	// Now, when set, is the clock: its reading in µs is sent with every
	// check. Meant for tests and for callers that batch on their own
	// clock. Default: nil, the Redis server's TIME read inside each script,
	// one clock for every process.
	Now func() time.Time
	// Timeout bounds each call to Redis (a check, a refund, a reset) from
	// when it is sent, not a check's wait for a coalesced call; past it the
	// call fails with sluice.ErrUnavailable. At least 1ms. Default:
	// DefaultTimeout (50ms).
	Timeout time.Duration
	// ClockPadding is added to the TTL of every key written. With the
	// server's clock a key expires exactly when its usage has fallen to
	// zero, so no padding is needed; with Now, a clock behind the server's
	// would otherwise let a key expire before its state is empty. Default:
	// 0 without Now, DefaultClockPadding (10s) with Now.
	ClockPadding time.Duration
	// MaxBatch is the most checks one script call decides. A Store has at
	// most two coalesced calls under way per node (the server; in a
	// Cluster, each master); checks that arrive meanwhile queue, and the
	// node's next free call takes up to MaxBatch of them (in a Cluster,
	// one call per hash slot among them; a check across slots is never
	// batched). decide.lua decides a call's checks one after the
	// other, each atomically and all or nothing, as if they had been sent
	// one by one. There is no timer: a check that finds a free call is
	// sent at once. 1 sends one call per check (no queue). Default:
	// DefaultMaxBatch.
	MaxBatch int
	// MaxQueue bounds the checks waiting for a coalesced call (with
	// MaxBatch > 1), per node (in a Cluster, per master): past it a check fails at once with an error wrapping
	// sluice.ErrUnavailable, rather than waiting behind a queue Redis
	// cannot drain in time. It bounds the queue's memory (a few hundred
	// bytes per check) and its latency whatever the callers' contexts
	// allow. Checks already sent are not counted. Default:
	// DefaultMaxQueue.
	MaxQueue int
	// Logger receives the failures the Store cannot return, such as a
	// refund that could not be made. Default: nil, which discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(o.Prefix, "{}") {
		return o, fmt.Errorf("%w: prefix %q contains a brace, which would change the hash slot of every key", sluice.ErrInvalid, o.Prefix)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < time.Millisecond {
		return o, fmt.Errorf("%w: timeout %v is below 1ms", sluice.ErrInvalid, o.Timeout)
	}
	if o.ClockPadding == 0 && o.Now != nil {
		o.ClockPadding = DefaultClockPadding
	}
	if o.ClockPadding < 0 {
		return o, fmt.Errorf("%w: ClockPadding must be >= 0, got %v", sluice.ErrInvalid, o.ClockPadding)
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxBatch < 1 {
		return o, fmt.Errorf("%w: MaxBatch must be >= 1, got %d", sluice.ErrInvalid, o.MaxBatch)
	}
	if o.MaxQueue == 0 {
		o.MaxQueue = DefaultMaxQueue
	}
	if o.MaxQueue < 1 {
		return o, fmt.Errorf("%w: MaxQueue must be >= 1, got %d", sluice.ErrInvalid, o.MaxQueue)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
