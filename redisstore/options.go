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
	// DefaultTimeout bounds each call to Redis.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultMaxBatch is the default Options.MaxBatch.
	DefaultMaxBatch = 64
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
	// MaxBatch is the most checks one script call decides. Checks that
	// arrive while earlier calls are under way (at most two) are coalesced
	// into one call of decide.lua, which decides them one after the other,
	// each atomically and all or nothing, as if they had been sent one by
	// one (in a Cluster, one call per hash slot; a check across slots is
	// never batched). There is no timer: a check that finds a free call is
	// sent at once. 1 sends one call per check. Default: DefaultMaxBatch.
	MaxBatch int
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
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
