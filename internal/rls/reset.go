package rls

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
)

// ErrNoCounter reports that Reset found no counter of the rules under a
// key: an unknown domain, a key the service does not build, a key that
// selects no rule with a limit, or the counter of a limit override (its
// limit comes with each request, not from the rules).
var ErrNoCounter = errors.New("rls: no counter of the rules under this key")

// Reset clears the counter of domain whose key is a hit's Key as the
// service builds it (the descriptor's entries, length-prefixed: what the
// top-keys lists hold for a domain), through the domain's failure
// policy's limiter, as POST /v1/reset does for a zone. It returns the
// check that was reset (the server forgets it from its deny caches), or
// an error wrapping ErrNoCounter.
func (s *Service) Reset(ctx context.Context, domain, key string) (sluice.Check, error) {
	dom := s.rules.Load().Domain(domain)
	if dom == nil {
		return sluice.Check{}, fmt.Errorf("%w: unknown domain %q", ErrNoCounter, domain)
	}
	entries, ok := parseKey(key)
	if !ok {
		return sluice.Check{}, fmt.Errorf("%w: not a descriptor's key", ErrNoCounter)
	}
	m, ok := dom.match(entries)
	if !ok || m.key != key || m.rule.limit == nil || m.rule.limit.unlimited || m.rule.limit.sl.Rate == 0 {
		return sluice.Check{}, fmt.Errorf("%w: no rule with a limit selects it", ErrNoCounter)
	}
	c := sluice.Check{Hits: []sluice.Hit{{Zone: "rls/" + dom.Name, Key: key, Limit: m.rule.limit.sl}}}
	if err := s.opts.Limiter(dom.Failure).Reset(ctx, c); err != nil {
		return c, fmt.Errorf("rls: reset: %w", err)
	}
	return c, nil
}

// parseKey reads the entries of a counter key written by appendEntry.
func parseKey(key string) ([]entry, bool) {
	var entries []entry
	next := func() (string, bool) {
		n, rest, ok := strings.Cut(key, ":")
		size, err := strconv.Atoi(n)
		if !ok || err != nil || size < 0 || size > len(rest) || strconv.Itoa(size) != n {
			return "", false
		}
		key = rest[size:]
		return rest[:size], true
	}
	for key != "" {
		k, ok := next()
		if !ok {
			return nil, false
		}
		v, ok := next()
		if !ok {
			return nil, false
		}
		entries = append(entries, entry{k, v})
	}
	return entries, len(entries) > 0
}
