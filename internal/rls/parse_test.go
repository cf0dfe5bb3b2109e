package rls_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/rls"
)

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		// want is "line: text" of the first problem.
		line int
		want string
	}{
		{"no domain", "descriptors: []\n", 1, "missing domain"},
		{"unknown field", "domain: d\ndescriptors:\n  - key: k\n    valu: v\n", 4, `unknown field "valu"`},
		{"empty key", "domain: d\ndescriptors:\n  - value: v\n    rate_limit: {unit: second, requests_per_unit: 1}\n", 3, "missing key"},
		{"bad unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n", 5, `unknown unit "fortnight"`},
		{"no unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 3}\n", 4, "missing unit"},
		{"negative rate", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", 4, "want an integer"},
		{"unlimited with a unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n", 4, "unlimited"},
		{"duplicate", "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n", 5, `duplicate descriptor "k_v" (also at line 3)`},
		{"share without wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n", 3, "share_threshold needs a wildcard"},
		{"replaces without name", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces: [{}]\n", 7, "replaces needs the name"},
		{"bad algorithm", "domain: d\nalgorithm: leaky\n", 2, `unknown algorithm "leaky"`},
		{"bad failure", "domain: d\nfailure: maybe\n", 2, `unknown failure policy "maybe"`},
		{"not yaml", "domain: [\n", 2, "did not find expected node content"},
		{"empty", "", 0, "the file is empty"},
		{"quoted boolean", "domain: d\ndescriptors:\n  - key: k\n    detailed_metric: \"yes\"\n", 4, `want true or false, got "yes"`},
		{"key given twice", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      requests_per_unit: 2\n", 7, `field "requests_per_unit" given twice`},
		{"metadata not a mapping", "domain: d\ndescriptors:\n  - key: k\n    metadata: [a]\n", 4, "want a mapping"},
		{"merge of a scalar", "domain: d\ndescriptors:\n  - key: &a k\n  - key: j\n    <<: *a\n", 5, "a merge key takes a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rls.Parse(map[string][]byte{"f.yaml": []byte(tc.text)})
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err %v, want a *config.Error", err)
			}
			if ce.File != "f.yaml" || ce.Line != tc.line || !strings.Contains(ce.Problem, tc.want) {
				t.Errorf("got %q (line %d), want f.yaml line %d with %q", err, ce.Line, tc.line, tc.want)
			}
		})
	}
}

func TestParseDuplicateDomain(t *testing.T) {
	_, err := rls.Parse(map[string][]byte{"a.yaml": []byte("domain: d\n"), "b.yaml": []byte("domain: d\n")})
	if err == nil || !strings.Contains(err.Error(), "b.yaml:1: domain: domain \"d\" is also defined in a.yaml") {
		t.Errorf("err %v, want b.yaml:1 naming a.yaml", err)
	}
}

func TestLoadDirSkipsOtherFiles(t *testing.T) {
	dir := t.TempDir()
	r := &rig{t: t, dir: dir}
	r.write("a.yaml", "domain: a\n")
	r.write("b.yml", "domain: b\n")
	r.write(".swap.yaml", "not: [valid\n")
	r.write("README", "not yaml at all: [\n")
	rules, err := rls.LoadDir(dir)
	if err != nil || rules.Domains() != 2 || rules.Domain("a") == nil || rules.Domain("b") == nil {
		t.Fatalf("LoadDir: %v, %d domains; want a and b", err, rules.Domains())
	}
	// As envoyproxy/ratelimit: no rule file, no domain, every answer OK.
	if rules, err := rls.LoadDir(t.TempDir()); err != nil || rules.Domains() != 0 {
		t.Errorf("an empty directory: %v, %v; want no domains and no error", rules, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(example2))
	f.Add([]byte(apiRules))
	f.Add([]byte("a: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rls.Parse(map[string][]byte{"f.yaml": data}) // must not panic
	})
}

// TestParseProblemTextExact: a problem from package
// sluice is printed through the typed *sluice.InvalidError, exactly, with
// no prefix cut out of its text.
func TestParseProblemTextExact(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"algorithm", "domain: d\nalgorithm: leaky\n",
			`f.yaml:2: algorithm: unknown algorithm "leaky" (want one of sliding-window, buckets, log, decay, gcra)`},
		{"limit", "domain: d\nalgorithm: log\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 20000}\n",
			`f.yaml:5: descriptors[0].rate_limit: limit "20000r/s": a log limit's rate must be <= 10000, got 20000 (use an estimating algorithm for higher rates)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rls.Parse(map[string][]byte{"f.yaml": []byte(tc.text)})
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestParseLoadsWhatEnvoyRatelimitLoads: files envoyproxy/ratelimit loads
// (YAML merge keys, shadow_mode without a rate_limit, metadata, YAML 1.1
// booleans, requests_per_unit above sluice.MaxRate, a '*' inside a value
// with share_threshold) load, with the meaning they have there.
func TestParseLoadsWhatEnvoyRatelimitLoads(t *testing.T) {
	text := `domain: d
descriptors:
  - key: first
    rate_limit: &perminute
      unit: minute
      requests_per_unit: 20
  - key: merged
    rate_limit:
      <<: *perminute
      requests_per_unit: 5
  - &base
    key: a
    rate_limit: {<<: *perminute}
  - <<: *base
    key: b
  - key: parent
    shadow_mode: true
    detailed_metric: yes
    value_to_metric: off
    metadata: {service: {name: s}}
    descriptors:
      - key: child
        rate_limit: {unit: day, requests_per_unit: 4294967295}
  - key: path
    value: /api/*/action
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
`
	if _, err := rls.Parse(map[string][]byte{"f.yaml": []byte(text)}); err != nil {
		t.Fatal(err)
	}
}

// TestParseMergeBomb: merge keys that merge mappings that merge others
// (each level doubling the fields) are refused after a bounded amount of
// work, not expanded without end.
func TestParseMergeBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - key: k0\n    rate_limit: &l0 {unit: second, requests_per_unit: 1}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "  - key: k%d\n    rate_limit: &l%d {<<: [*l%d, *l%d, *l%d, *l%d]}\n", i, i, i-1, i-1, i-1, i-1)
	}
	_, err := rls.Parse(map[string][]byte{"f.yaml": []byte(b.String())})
	if err == nil || !strings.Contains(err.Error(), "merge keys add more than") {
		t.Fatalf("err %v, want the bound on merged fields", err)
	}
}
