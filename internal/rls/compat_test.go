package rls_test

import "testing"

// TestWildcardMatchesItsKeyOnly: envoyproxy/ratelimit compares a
// wildcard's "key_prefix" with the request's "key_value", so its rule
// {key: wild, value: foo*} also matches an entry keyed wild_foo; sluice
// matches a wildcard only for an entry with the rule's key. A '*' that is
// not last is an ordinary character there and here.
func TestWildcardMatchesItsKeyOnly(t *testing.T) {
	r := start(t, map[string]string{"w.yaml": `
domain: w
descriptors:
  - key: wild
    value: foo*
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: mid
    value: bar*b
    rate_limit: {unit: minute, requests_per_unit: 1}
`}, rigOptions{})
	if st := r.ask("w", desc("wild", "foobar")).Statuses[0]; st.CurrentLimit == nil {
		t.Errorf("wild=foobar: %v, want the wildcard's limit", st)
	}
	if st := r.ask("w", desc("wild_foo", "x")).Statuses[0]; st.CurrentLimit != nil {
		t.Errorf("wild_foo=x: %v, want no limit (another key)", st)
	}
	if st := r.ask("w", desc("mid", "barxb")).Statuses[0]; st.CurrentLimit != nil {
		t.Errorf("mid=barxb: %v, want no limit (bar*b is not a wildcard)", st)
	}
	if st := r.ask("w", desc("mid", "bar*b")).Statuses[0]; st.CurrentLimit == nil {
		t.Errorf("mid=bar*b: %v, want the exact rule's limit", st)
	}
}
