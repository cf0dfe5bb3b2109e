package rls_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/rls"
)

const manyRules = `
domain: many
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 2}
`

// many returns n descriptors k=v0 ... k=v(n-1), each its own counter.
func many(n int) []*pbDesc {
	out := make([]*pbDesc, n)
	for i := range out {
		out[i] = desc("k", fmt.Sprintf("v%d", i))
	}
	return out
}

// TestMoreDescriptorsThanOneCheck: a request with more limited
// descriptors than one sluice check takes (sluice.MaxHits) is decided, not
// refused: an error would let Envoy's default failure_mode_deny: false
// pass it unlimited.
func TestMoreDescriptorsThanOneCheck(t *testing.T) {
	r := start(t, map[string]string{"many.yaml": manyRules}, rigOptions{})
	n := 3*sluice.MaxHits + 5
	for i := range 2 {
		resp := r.ask("many", many(n)...)
		if resp.OverallCode != codeOK || resp.Statuses[n-1].LimitRemaining != uint32(1-i) {
			t.Fatalf("request %d of %d descriptors: %v, want OK with %d remaining", i+1, n, resp.OverallCode, 1-i)
		}
	}
	if resp := r.ask("many", many(n)...); resp.OverallCode != codeOver || resp.Statuses[0].Code != codeOver || resp.Statuses[n-1].Code != codeOver {
		t.Fatalf("third request: %v, want OVER_LIMIT on every descriptor (2 per minute)", resp.OverallCode)
	}

	// All or nothing still: a descriptor without room, last in the
	// request, denies it before any other records the cost.
	r2 := start(t, map[string]string{"many.yaml": manyRules}, rigOptions{})
	last := many(n)[n-1]
	if got := r2.askN(3, "many", last); got != 2 {
		t.Fatalf("using up v%d: %d of 3 OK, want 2", n-1, got)
	}
	resp := r2.ask("many", many(n)...)
	if resp.OverallCode != codeOver || resp.Statuses[n-1].Code != codeOver {
		t.Fatalf("v%d used up: %v, want OVER_LIMIT", n-1, resp)
	}
	if st := resp.Statuses[0]; st.Code != codeOK || st.LimitRemaining != 2 {
		t.Errorf("v0 in the denied request: %v with %d remaining, want OK with 2 (nothing recorded)", st.Code, st.LimitRemaining)
	}
	if resp := r2.ask("many", many(1)...); resp.Statuses[0].LimitRemaining != 1 {
		t.Errorf("v0 after the denied request: %d remaining, want 1 (the denied request recorded nothing)", resp.Statuses[0].LimitRemaining)
	}
}

// TestOversizedRequestIsDenied: past rls.MaxLimitedDescriptors the request
// is answered OVER_LIMIT without the store, counted, and not an error.
func TestOversizedRequestIsDenied(t *testing.T) {
	r := start(t, map[string]string{"many.yaml": manyRules}, rigOptions{})
	n := rls.MaxLimitedDescriptors + 1
	resp := r.ask("many", many(n)...)
	if resp.OverallCode != codeOver || resp.Statuses[0].Code != codeOver || resp.Statuses[0].CurrentLimit == nil {
		t.Fatalf("%d limited descriptors: %v, want OVER_LIMIT with the limit", n, resp.OverallCode)
	}
	if resp := r.ask("many", many(1)...); resp.Statuses[0].LimitRemaining != 1 {
		t.Errorf("v0 after the oversized request: %d remaining, want 1 (nothing recorded)", resp.Statuses[0].LimitRemaining)
	}
	r.wantMetric(`sluice_rls_oversized_requests_total{domain="many"} 1`)
	if resp := r.ask("many", many(rls.MaxLimitedDescriptors)...); resp.OverallCode != codeOK {
		t.Errorf("%d limited descriptors: %v, want OK", rls.MaxLimitedDescriptors, resp.OverallCode)
	}
}
