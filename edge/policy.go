package edge

import (
	"fmt"

	"github.com/sluicehq/sluice"
)

// Policy says how a Guard decides a check when its store cannot.
type Policy uint8

// The failure policies. The zero value is PolicyOpen.
const (
	// PolicyOpen allows the check (Source FromFailOpen): an outage of the
	// limiter never becomes an outage of the service it protects. The
	// default, as in seed 002, Envoy and Kong.
	PolicyOpen Policy = iota
	// PolicyClosed denies the check (Source FromFailClosed): for limits
	// that protect something more valuable than availability, such as
	// login attempts.
	PolicyClosed
	// PolicyLocal decides the check with an in-process limiter (Source
	// FromFallback): each process enforces the limits on its own traffic,
	// so a fleet of n processes admits up to n times the limit.
	PolicyLocal
)

var policyNames = [...]string{"open", "closed", "local"}

// String returns the policy's name: "open", "closed" or "local".
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", p)
}

// ParsePolicy returns the policy named s: "open", "closed" or "local". The
// empty string is PolicyOpen; anything else is an error that wraps
// sluice.ErrInvalid and quotes s.
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return PolicyOpen, nil
	}
	for i, name := range policyNames {
		if s == name {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("edge: %w: unknown failure policy %q (want open, closed or local)", sluice.ErrInvalid, s)
}

func (p Policy) valid() bool { return int(p) < len(policyNames) }
