package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/keyname"
)

// Store is a sluice.Limiter whose state lives in Redis and is changed only
// by the atomic Lua scripts in scripts/. It is safe for concurrent use.
type Store struct {
	sc        Scripter
	owned     rueidis.Client // created by Dial; closed by Close
	cluster   bool
	prefix    string
	now       func() time.Time
	timeout   time.Duration
	padding   string // ClockPadding in ms, as sent in ARGV
	log       *slog.Logger
	scripts   scripts
	idPrefix  string
	seq       atomic.Uint64
	batcher   *coalescer // nil when Options.MaxBatch is 1
	slots     *slotMap   // nil outside a Cluster or without a SlotMapper
	closeOnce sync.Once
	closeErr  error // Close's result, set once by closeOnce
}

var _ sluice.Limiter = (*Store)(nil)

// New returns a Store on a rueidis client the caller owns (standalone,
// Sentinel or Cluster, told apart by the client's mode); Close leaves it
// open. A bad option is an error wrapping sluice.ErrInvalid.
func New(client rueidis.Client, opts Options) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redisstore: %w: nil client", sluice.ErrInvalid)
	}
	return NewWithScripter(rueidisScripter{client}, opts)
}

// Dial connects to the Redis at url and returns a Store on it; Close
// closes the connection. url is redis://[user:password@]host:port[/db],
// rediss://... (TLS, with Options.TLSConfig),
// redis-sentinel://[user:password@]host:port,host:port/master[/db]
// [?sentinel_password=...] (a master found through Sentinels), or
// redis-cluster://host:port,host:port (Cluster seeds); rediss-sentinel://
// and rediss-cluster:// use TLS. rueidis needs a first successful
// connection: an unreachable Redis is an error wrapping
// sluice.ErrUnavailable; a bad URL or option one wrapping sluice.ErrInvalid.
func Dial(url string, opts Options) (*Store, error) {
	if _, err := opts.withDefaults(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	u, err := parseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	client, err := rueidis.NewClient(u.clientOption(opts.TLSConfig))
	if err != nil {
		return nil, fmt.Errorf("redisstore: connect to %s: %w: %w", redact(url), sluice.ErrUnavailable, err)
	}
	s, err := New(client, opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.owned = client
	return s, nil
}

// NewWithScripter returns a Store on any client behind the Scripter
// interface, such as a go-redis client adapted by package
// redisstore/goredis; Cluster mode is the Scripter's. Close leaves the
// client open. A bad option is an error wrapping sluice.ErrInvalid.
func NewWithScripter(sc Scripter, opts Options) (*Store, error) {
	if sc == nil {
		return nil, fmt.Errorf("redisstore: %w: nil Scripter", sluice.ErrInvalid)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	s := &Store{
		sc: sc, cluster: sc.Cluster(), prefix: o.Prefix, now: o.Now,
		timeout: o.Timeout, log: o.Logger,
		padding: strconv.FormatInt(o.ClockPadding.Milliseconds(), 10),
		scripts: loadScripts(), idPrefix: randomID(),
	}
	if o.MaxBatch > 1 {
		s.batcher = newCoalescer(s, o.MaxBatch, o.MaxQueue)
	}
	if m, ok := sc.(SlotMapper); ok && s.cluster {
		s.slots = &slotMap{mapper: m, timeout: o.Timeout, log: o.Logger}
	}
	return s, nil
}

// randomID returns 8 random bytes in base64url: the part of every check id
// that keeps the log members of different Stores apart.
func randomID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Close waits until the checks already queued for a coalesced call are
// decided, then closes the client the Store created in Dial (a client or
// Scripter given to New or NewWithScripter is left open). If a call of
// those queued checks failed (Redis did not answer them), Close returns
// its error, wrapping sluice.ErrUnavailable: the last checks before a
// shutdown were not decided. Checks after Close fail with an error
// wrapping sluice.ErrUnavailable. Close is idempotent: later calls return
// the first one's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.batcher != nil {
			if err := s.batcher.close(); err != nil {
				s.closeErr = fmt.Errorf("redisstore: close: checks queued at Close were not decided: %w: %w", sluice.ErrUnavailable, err)
			}
		}
		if s.owned != nil {
			s.owned.Close()
		}
	})
	return s.closeErr
}

// Check implements sluice.Limiter. It validates c before any round trip
// (errors wrap sluice.ErrInvalid), then decides it with one script call,
// or one per hash slot in a Cluster (see the package doc). A failure to get
// an answer within Options.Timeout wraps sluice.ErrUnavailable; the
// caller's context being done is returned as the context's error. A check
// the script failed on because of what one of its keys holds (data of
// another type under the prefix) fails alone with an error wrapping
// sluice.ErrBadState, not ErrUnavailable, logged with its keys' digests.
func (s *Store) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: check %s: %w", describe(c), err)
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("redisstore: check %s: %w", describe(c), err)
	}
	calls := s.plan(c, true)
	replies, err := s.runChecks(ctx, calls)
	if err == nil {
		s.decide(c, calls, replies, d)
	}
	if refunds := s.toRefund(c, calls, replies, err); len(refunds) > 0 {
		s.refund(ctx, c, calls, replies, refunds)
	}
	if err != nil {
		return s.failure(ctx, "check", c, err)
	}
	return nil
}

// Reset implements sluice.Limiter: it deletes the state of every hit of c,
// with one call per hash slot. c.Cost is ignored.
func (s *Store) Reset(ctx context.Context, c sluice.Check) error {
	c.Cost = 0
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: reset %s: %w", describe(c), err)
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("redisstore: reset %s: %w", describe(c), err)
	}
	callCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for _, call := range s.plan(c, false) {
		if _, err := run(callCtx, s.sc, s.scripts.reset, call.keys, nil); err != nil {
			return s.failure(ctx, "reset", c, err)
		}
	}
	return nil
}

// failure wraps a Redis error: the caller's context is reported as such;
// a check the script failed on in every call that failed is that check's
// own error (sluice.ErrBadState, logged with its keys' digests); anything
// else means Redis could not answer.
func (s *Store) failure(ctx context.Context, op string, c sluice.Check, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("redisstore: %s %s: %w", op, describe(c), ctxErr)
	}
	if onlyBadState(err) {
		s.log.Warn("redisstore: a check failed on the stored state of its keys; the data under them is not sluice's",
			"op", op, "keys", digests(c))
		return fmt.Errorf("redisstore: %s %s: %w", op, describe(c), err)
	}
	s.unavailable()
	return fmt.Errorf("redisstore: %s %s: %w: %w", op, describe(c), sluice.ErrUnavailable, err)
}

// unavailable notes a call Redis did not answer: in a Cluster, a failover
// may be under way, so the slot map is read again soon.
func (s *Store) unavailable() {
	if s.slots != nil {
		s.slots.failed()
	}
}

// onlyBadState reports whether err, or every error err joins, is a check
// the script failed on.
func onlyBadState(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyBadState(e) {
				return false
			}
		}
		return len(j.Unwrap()) > 0
	}
	return errors.Is(err, errCheckFailed)
}

// digests names every hit of c in logs: its zone and the digest of its key
// (see internal/keyname).
func digests(c sluice.Check) []string {
	out := make([]string, len(c.Hits))
	for i, h := range c.Hits {
		out[i] = fmt.Sprintf("%q/%s", h.Zone, keyname.Of(h.Key))
	}
	return out
}

// describe names a check in errors and logs: its first hit's zone and the
// digest of its key (keys are often credentials; see internal/keyname), and
// how many hits follow.
func describe(c sluice.Check) string {
	if len(c.Hits) == 0 {
		return "(no hits)"
	}
	h := c.Hits[0]
	s := fmt.Sprintf("zone %q key %s", h.Zone, keyname.Of(h.Key))
	if len(c.Hits) > 1 {
		s += fmt.Sprintf(" (+%d hits)", len(c.Hits)-1)
	}
	return s
}
