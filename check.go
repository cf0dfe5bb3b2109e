package sluice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/ident"
	"github.com/sluicehq/sluice/internal/keyname"
)

// Errors a caller can branch on with errors.Is. A denial is never an error.
var (
	// ErrInvalid marks bad input: a malformed limit, an empty key, a
	// negative cost, a cost greater than a limit's Rate. Retrying the same
	// call cannot succeed. The HTTP layer answers it with 400.
	ErrInvalid = errors.New("sluice: invalid input")
	// ErrUnavailable marks a store that could not be reached or did not
	// answer in time. The failure policy decides what happens next.
	ErrUnavailable = errors.New("sluice: store unavailable")
	// ErrBadState marks a check that failed on the stored state of one of
	// its keys: the store answered, but what it holds there is not state
	// sluice wrote, such as a key of another type under a Redis store's
	// prefix. It applies to that check alone: the store is healthy and
	// other keys' checks go on, so it does not wrap ErrUnavailable, and
	// failure policies and breakers (package edge) do not count it. The
	// same check fails again until the key expires or is deleted (Reset
	// deletes it).
	ErrBadState = errors.New("sluice: bad stored state")
)

// MaxHits is the largest number of hits in one Check.
const MaxHits = 16

// MaxKeyLen is the longest key, in bytes, a Hit may have.
const MaxKeyLen = 64 << 10

// A Hit is one key under one limit. Two hits with the same Zone, Key and
// limit identity (Algorithm, Window and bucket length), in checks of the
// same Group, share their state in every store, whatever their Rate, Name
// or Shadow flag: raising a limit keeps the usage counted so far.
type Hit struct {
	// Zone is a namespace for keys, such as the name of a configured zone.
	// Keys in different zones never share state. May be empty.
	Zone string
	// Key identifies who is limited: a client address, a user, a token.
	// Must not be empty; at most MaxKeyLen bytes; any bytes are allowed.
	Key string
	// Limit is the limit this key is held to.
	Limit Limit
}

// A Check asks whether Cost may be spent now on every one of its Hits.
// It is allowed only if every non-shadow hit stays within its limit with
// the cost added; then the cost is recorded on every hit. Otherwise nothing
// is recorded on any hit.
type Check struct {
	// Hits are the keys and limits to check, 1 to MaxHits of them, no two
	// sharing state.
	Hits []Hit
	// Cost is the amount to spend, >= 0 and no more than any hit's Rate.
	// Zero peeks: the state is reported and nothing is recorded.
	Cost int64
	// Group, when set, co-locates the state of all hits: in Redis Cluster
	// they share the hash tag {Group}, so one atomic script decides them
	// (seed LUA_rateLimiting's shared resource). Empty means each hit is
	// placed by its own key. The Group is part of each hit's state
	// identity in every store: the same zone, key and limit under another
	// Group (or none) is another state.
	Group string
	// Shadow makes every hit a shadow hit, as if each Limit.Shadow were set.
	Shadow bool
}

// Validate reports whether c is well formed: every error wraps ErrInvalid
// and names the offending hit.
func (c Check) Validate() error {
	if len(c.Hits) == 0 {
		return fmt.Errorf("%w: check has no hits", ErrInvalid)
	}
	if len(c.Hits) > MaxHits {
		return fmt.Errorf("%w: check has %d hits, more than %d", ErrInvalid, len(c.Hits), MaxHits)
	}
	if c.Cost < 0 {
		return fmt.Errorf("%w: cost must be >= 0, got %d", ErrInvalid, c.Cost)
	}
	for i, h := range c.Hits {
		if err := h.validate(c.Cost); err != nil {
			return fmt.Errorf("hit %d: %w", i, err)
		}
		for j := range i {
			if c.Hits[j].state(c.Group) == h.state(c.Group) {
				return fmt.Errorf("%w: hits %d and %d share state (zone %q, key %s, %s %v)", ErrInvalid, j, i, h.Zone, keyname.Of(h.Key), h.Limit.Algo(), h.Limit.Window)
			}
		}
	}
	return nil
}

func (h Hit) validate(cost int64) error {
	switch {
	case h.Key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case len(h.Key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes is longer than %d", ErrInvalid, len(h.Key), MaxKeyLen)
	}
	if err := h.Limit.Validate(); err != nil {
		return err
	}
	if cost > h.Limit.Rate {
		return fmt.Errorf("%w: cost %d is greater than the rate of limit %q and could never pass", ErrInvalid, cost, h.Limit.String())
	}
	return nil
}

// state returns the identity of h's stored state in a check of group: the
// one definition every store shares (see internal/ident).
func (h Hit) state(group string) ident.State {
	l := h.Limit
	return ident.State{Zone: h.Zone, Key: h.Key, Group: group,
		Limit: ident.LimitOf(string(l.Algo()), l.Window, l.Bucket())}
}

// HitResult is the state of one hit after a check.
type HitResult struct {
	// Allowed reports whether this hit alone would let the check pass.
	Allowed bool
	// Shadow reports that the hit was in shadow mode: it was recorded as if
	// allowed and could not deny the check.
	Shadow bool
	// Used is the estimated usage in the window: after this check if the
	// check was allowed, before it otherwise. Fractional for estimating
	// algorithms.
	Used float64
	// Remaining is floor(Rate - Used), at least 0.
	Remaining int64
	// RetryAfter is zero when Allowed; otherwise the shortest wait after
	// which the hit would allow the same cost if no other traffic came.
	RetryAfter time.Duration
	// ResetAfter is the wait until the usage has fallen to zero (for Decay,
	// below 0.01).
	ResetAfter time.Duration
}

// Source says how a Decision was reached. The zero value, Undecided, marks
// a Decision that no limiter has written.
type Source uint8

// The sources of a decision.
const (
	// Undecided: nothing was decided; the zero value of a Decision.
	Undecided Source = iota
	// FromStore: the store decided. The normal case.
	FromStore
	// FromDenyCache: a recent denial was repeated without asking the store.
	FromDenyCache
	// FromLocalView: the asynchronous mode decided from its local view of
	// the shared usage.
	FromLocalView
	// FromFailOpen: the store could not be reached; the check was allowed.
	FromFailOpen
	// FromFailClosed: the store could not be reached; the check was denied.
	FromFailClosed
	// FromFallback: the store could not be reached; an in-process limiter
	// decided.
	FromFallback
)

var sourceNames = [...]string{"undecided", "store", "deny-cache", "local-view", "fail-open", "fail-closed", "fallback"}

// String returns the source's name, such as "fail-open", for logs and
// metric labels.
func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return fmt.Sprintf("Source(%d)", s)
}

// Degraded reports whether the decision was taken without the store because
// the store failed.
func (s Source) Degraded() bool { return s >= FromFailOpen }

// Decision is the outcome of a Check. Its zero value means nothing was
// decided (Source is Undecided). A Decision is written by a Limiter; the
// helpers Prepare, Conclude and Degrade are for implementations of
// Limiter, not for their callers.
type Decision struct {
	// Allowed reports whether the cost was spent (or, for a peek, whether
	// it could have been).
	Allowed bool
	// Shadowed reports that a shadow hit would have denied the check.
	Shadowed bool
	// Source says how the decision was reached.
	Source Source
	// Hits holds one result per hit, in the order of Check.Hits. Empty when
	// the decision was made without any limiter's state (FromFailOpen,
	// FromFailClosed).
	Hits []HitResult

	denier int           // 1 + index of the first non-shadow hit that denied; 0 for none
	wait   time.Duration // RetryAfter of a denial without hits
}

// Denier returns the index in Check.Hits (and in d.Hits) of the first
// non-shadow hit that denied the check. ok is false when the check was
// allowed, when nothing was decided, and when it was denied without hit
// results (FromFailClosed): then no hit is to blame.
func (d *Decision) Denier() (i int, ok bool) {
	if d.denier == 0 || d.denier > len(d.Hits) {
		return -1, false
	}
	return d.denier - 1, true
}

// RetryAfter returns how long to wait before the same check could pass: the
// longest RetryAfter of the hits that deny it (shadow hits excluded), the
// wait a failure policy set for a denial without hits, or zero when the
// check was allowed or not decided.
func (d *Decision) RetryAfter() time.Duration {
	if d.Allowed || d.Source == Undecided {
		return 0
	}
	if d.denier == 0 {
		return d.wait
	}
	var wait time.Duration
	for _, h := range d.Hits {
		if !h.Shadow && !h.Allowed {
			wait = max(wait, h.RetryAfter)
		}
	}
	return wait
}

// Prepare readies d to receive the results of n hits, reusing its storage:
// d becomes undecided with n zeroed HitResults. For Limiter
// implementations.
func (d *Decision) Prepare(n int) {
	hits := d.Hits[:0]
	if cap(hits) < n {
		hits = make([]HitResult, 0, n)
	}
	*d = Decision{Hits: hits[:n]}
	clear(d.Hits)
}

// Conclude derives the decision from its hit results and records src: the
// check is allowed iff every non-shadow hit is Allowed; Shadowed is set when
// a shadow hit is not; the first non-shadow hit that is not Allowed is the
// Denier. This is the one place the all-or-nothing rule turns per-hit
// outcomes into a Decision; every store calls it after filling d.Hits. For
// Limiter implementations.
func (d *Decision) Conclude(src Source) {
	d.Allowed, d.Shadowed, d.Source, d.denier, d.wait = true, false, src, 0, 0
	for i := range d.Hits {
		switch h := &d.Hits[i]; {
		case h.Allowed:
		case h.Shadow:
			d.Shadowed = true
		case d.denier == 0:
			d.denier = i + 1
			d.Allowed = false
		}
	}
}

// Degrade records a decision reached without any hit results, as a failure
// policy does: allowed or not, from src, and for a denial the wait that
// RetryAfter reports. d.Hits becomes empty. For Limiter implementations.
func (d *Decision) Degrade(src Source, allowed bool, retryAfter time.Duration) {
	d.Prepare(0)
	d.Allowed, d.Source = allowed, src
	if !allowed {
		d.wait = max(retryAfter, 0)
	}
}

// Limiter decides checks. Implementations are safe for concurrent use.
type Limiter interface {
	// Check decides c and writes the outcome to d, reusing d.Hits' storage.
	// It returns an error only when it could not decide; then d says
	// nothing.
	Check(ctx context.Context, c Check, d *Decision) error
	// Reset forgets the state of every hit of c. Cost is ignored.
	Reset(ctx context.Context, c Check) error
}

// Allow is shorthand for l.Check of one hit (key in the empty zone, under
// limit) at cost 1, returning the decision. Use Check with a reused
// Decision where allocations matter, or for several limits, zones or costs.
func Allow(ctx context.Context, l Limiter, key string, limit Limit) (Decision, error) {
	var d Decision
	err := l.Check(ctx, Check{Hits: []Hit{{Key: key, Limit: limit}}, Cost: 1}, &d)
	return d, err
}
