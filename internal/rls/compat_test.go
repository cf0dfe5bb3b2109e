package rls_test

import "testing"

// TestWildcardMatchesItsKeyOnly: envoyproxy/ratelimit compares a
// wildcard's "key_prefix" with the request's "key_value", so its rule
// {key: wild, value: foo*} also matches an entry keyed wild_foo; sluice
// matches a wildcard only for an entry with the rule's key. A '*' inside a
// value is a wildcard too, as on envoyproxy/ratelimit's main branch.
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
	for _, v := range []string{"barxb", "barb", "bar*b", "bar/x/b"} {
		if st := r.ask("w", desc("mid", v)).Statuses[0]; st.CurrentLimit == nil {
			t.Errorf("mid=%s: %v, want the limit of bar*b", v, st)
		}
	}
	for _, v := range []string{"bar", "barxbx", "xbarb"} {
		if st := r.ask("w", desc("mid", v)).Statuses[0]; st.CurrentLimit != nil {
			t.Errorf("mid=%s: %v, want no limit (bar*b does not match)", v, st)
		}
	}
}
