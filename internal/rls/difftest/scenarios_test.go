package difftest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// pinned are the scenarios whose answers differ, by "mode/scenario": how
// many requests differ and in which fields. Each is a row of the "What
// differs" table of docs/envoy.md. Every other scenario answers
// identically.
var pinned = map[string]string{
	// A shadow rule over its limit: envoyproxy/ratelimit (with
	// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT) then counts nothing on the
	// request's other descriptors; sluice counts them, as a shadow rule
	// never changes what is counted.
	"plain/shadow-rule-over-stops-others": "2: limit_remaining",
	// A limit override's unit_multiplier: sluice enforces and echoes it,
	// envoyproxy/ratelimit ignores it.
	"plain/override-unit-multiplier": "2: current_limit.unit_multiplier",
	// A counter named three times, on a request that its last occurrence
	// denies: envoyproxy/ratelimit records the occurrences that fit, sluice
	// records nothing (all or nothing), so the next request differs.
	"plain/all-or-nothing-repeated": "2: code, limit_remaining",
	// An empty domain or no descriptors over gRPC: sluice answers
	// INVALID_ARGUMENT, envoyproxy/ratelimit UNKNOWN.
	"plain/malformed": "2: error",
	// A limit override with unit UNKNOWN: envoyproxy/ratelimit's process
	// panics (the connection drops), sluice answers INVALID_ARGUMENT.
	"plain/override-unknown-unit": "1: error",
}

// scenarios are the request sequences of a mode. Counters with a per-second
// limit get one request each (a second's boundary would split a sequence
// differently in a fixed and a sliding window).
func scenarios(m mode) []scenario {
	s := []scenario{
		// envoyproxy/ratelimit's README example set (examples/ratelimit/config).
		{name: "rl-replaces-category", reqs: cat(
			times(6, ask("rl", d("category", "account"))),
			times(3, ask("rl", d("source_cluster", "proxy", "destination_cluster", "fake"), d("category", "account"))),
		)},
		{name: "rl-nested", reqs: cat(
			times(3, ask("rl", d("source_cluster", "proxy", "destination_cluster", "mock"))),
			times(4, ask("rl", d("source_cluster", "proxy", "destination_cluster", "bkthomps"), d("foo", "f1", "bar", "bkthomps"))),
			times(4, ask("rl", d("source_cluster", "proxy", "destination_cluster", "override"), d("foo", "f2", "bar", "banned"))),
			times(2, ask("rl", d("foo", "f3", "bar", "banned"))),
			times(2, ask("rl", d("source_cluster", "proxy", "destination_cluster", "other"))),
			times(2, ask("rl", d("source_cluster", "proxy"))),
		)},
		{name: "rl-foo", reqs: cat(
			times(3, ask("rl", d("foo", "f4"))),
			times(4, ask("rl", d("foo", "f5", "bar", "b1"))),
			times(2, ask("rl", d("foo", "f6", "bar", "bkthomps"))),
			times(4, ask("rl", d("foo", "f7", "baz", "not-so-shady"))),
			times(5, ask("rl", d("foo", "f8", "baz", "shady"))),
			[]request{ask("rl", d("foo", "f9", "baz", "b1")), ask("rl", d("foo", "f9", "baz", "b2"))},
			times(2, ask("rl", d("foo", "f10", "bay", "x"))),
			times(2, ask("rl", d("qux", "q1"))),
			times(3, ask("rl", d("unspec", "u1"))),
			times(2, ask("rl", d("foo", "f11", "bar", "b2", "extra", "x"))),
		)},
		{name: "mongo_cps", reqs: []request{
			ask("mongo_cps", d("database", "users")),
			ask("mongo_cps", d("database", "default")),
			ask("mongo_cps", d("database", "other")),
		}},
		// Modelled on the README's other examples.
		{name: "readme-messaging", reqs: cat(
			times(7, ask("messaging", d("message_type", "marketing", "to_number", "2061111111"), d("to_number", "2061111111"))),
			times(3, ask("messaging", d("to_number", "2062222222"))),
			times(2, ask("messaging", d("message_type", "transactional", "to_number", "2063333333"))),
		)},
		{name: "readme-edge-proxy-per-ip", reqs: cat(
			times(12, ask("edge_proxy_per_ip", d("remote_address", "50.0.0.1"))),
			times(2, ask("edge_proxy_per_ip", d("remote_address", "50.0.0.5"))),
			times(2, ask("edge_proxy_per_ip", d("remote_address", "50.0.0.6"), d("remote_address", "50.0.0.5"))),
		)},
		{name: "readme-example4", reqs: cat(
			times(4, ask("example4", d("key", "value"))),
			times(3, ask("example4", d("key", "value", "subkey", "subvalue"))),
			times(1, ask("example4", d("key", "other", "subkey", "subvalue"))),
		)},
		{name: "readme-internal", reqs: cat(
			times(2, ask("internal", d("ldap", "l1"))),
			times(3, ask("internal", d("azure", "a1"), d("ldap", "l1"))),
		)},
		{name: "readme-example6", reqs: cat(
			times(12, ask("example6", d("service", "auth", "user", "user-a"))),
			times(3, ask("example6", d("service", "auth", "user", "user-b"))),
			times(1, ask("example6", d("service", "auth", "user", "user-c"))),
		)},
		{name: "readme-example7", reqs: cat(
			times(6, ask("example7", d("key_1", "value_1", "user", "bkthomps"))),
			times(3, ask("example7", d("key_1", "value_1", "user", "bkthomps"), d("key_2", "value_2", "user", "bkthomps"))),
		)},
		{name: "readme-example8-9", reqs: cat(
			times(3, ask("example8", d("key1", "unspecified"))),
			times(2, ask("example8", d("key1", "value1"))),
			times(4, ask("example8", d("key9", "value1"))),
			times(1, ask("example8", d("key9", "value2"))),
			times(1, ask("example8", d("key9", "other"))),
		)},
		{name: "readme-example10", reqs: cat(
			times(4, ask("example10", d("route", "r1", "http_method", "GET", "subject_id", "s1"))),
			times(1, ask("example10", d("route", "r1", "http_method", "POST", "subject_id", "s1"))),
			times(1, ask("example10", d("route", "r1", "http_method", "GET"))),
		)},
		// envoyproxy/ratelimit's integration-test configs.
		{name: "another", reqs: cat(
			times(22, ask("another", d("key2", "a1"))),
			times(12, ask("another", d("key3", "a1"))),
			times(3, ask("another", d("key4", "a1"))),
			times(2, ask("another", d("key2_local", "a1"), d("key3_local", "a1"), d("key4_local", "a1"))),
		)},
		{name: "basic", reqs: cat(
			[]request{ask("basic", d("key1", "b1")), ask("basic", d("key1", "b2")), ask("basic", d("key1_local", "b3"))},
			times(3, ask("basic", d("one_per_minute", "b1"))),
		)},
		{name: "share-threshold", reqs: cat(
			[]request{
				ask("share-threshold-test", d("files", "files/a")), ask("share-threshold-test", d("files", "files/b")),
				ask("share-threshold-test", d("files", "files/c")), ask("share-threshold-test", d("files", "files/d")),
			},
			times(8, ask("share-threshold-test", d("files", "files/e"))),
			times(11, ask("share-threshold-test", d("files_no_share", "files_no_share/a"))),
			times(2, ask("share-threshold-test", d("files_no_share", "files_no_share/b"))),
		)},
		// Edge cases.
		{name: "repeated-descriptor", reqs: cat(
			times(11, ask("edge", d("twice", "a"), d("twice", "a"))),
			times(7, ask("edge", d("twice", "b"), d("twice", "b"), d("twice", "b"))),
			times(2, ask("edge", d("odd", "a"), d("odd", "a"))),
		)},
		{name: "addends", reqs: cat(
			times(4, request{domain: "edge", descs: ask("edge", d("small", "a")).descs, addend: 2}),
			times(2, ask("edge", plus(3, d("small", "b")))),
			times(2, ask("edge", plus(6, d("small", "c")))),
			times(2, ask("edge", plus(0, d("small", "d")))),
			times(1, ask("edge", d("small", "d"))),
			times(3, ask("edge", plus(2, d("small", "e")), plus(1, d("odd", "e")))),
			times(3, ask("edge", plus(2, d("small", "f")), plus(2, d("small", "f")))),
		)},
		{name: "never-passes", reqs: cat(
			times(2, ask("edge", d("block", "x"))),
			times(2, ask("edge", d("block", "x2"), d("small", "g"))),
			times(1, ask("edge", d("small", "g"))),
			times(2, ask("edge", d("shadowblock", "y"))),
		)},
		{name: "shadow-rule", reqs: cat(
			times(4, ask("edge", d("shadow", "z"))),
			times(2, ask("edge", d("shadow", "z2"), d("small", "z2"))),
		)},
		{name: "units", reqs: cat(
			[]request{ask("edge", d("u_second", "a"))},
			times(3, ask("edge", d("u_minute", "a"))),
			times(3, ask("edge", d("u_hour", "a"))),
			times(2, ask("edge", d("u_day", "a"))),
			times(2, ask("edge", d("u_week", "a"))),
			times(2, ask("edge", d("u_month", "a"))),
			times(2, ask("edge", d("u_year", "a"))),
		)},
		{name: "names-replaces", reqs: cat(
			times(3, ask("edge", d("named", "a"), d("replacer", "a"))),
			times(5, ask("edge", d("named", "b"))),
			times(2, ask("edge", d("free", "x"), d("named", "c"))),
		)},
		{name: "wildcards", reqs: cat(
			times(4, ask("edge", d("path", "/api/v1"))),
			times(1, ask("edge", d("path", "/api/v2"))),
			times(3, ask("edge", d("path", "/api/exact"))),
			times(2, ask("edge", d("path", "/other"))),
			[]request{ask("edge", d("path", "/static/a")), ask("edge", d("path", "/static/b")), ask("edge", d("path", "/static/c"))},
			times(2, ask("edge", d("path", "/static/d"))),
			times(2, ask("edge", d("path", "/static/e"), d("path", "/static/f"))),
		)},
		{name: "nested-wildcards-depth", reqs: cat(
			times(4, ask("edge", d("tenant", "t", "user", "u"))),
			times(6, ask("edge", d("tenant", "t", "user", "vip1"))),
			times(3, ask("edge", d("deep", "a"))),
			times(2, ask("edge", d("deep", "a", "deeper", "x"))),
			times(1, ask("edge", d("deep", "b"))),
			times(1, ask("edge", d("deep", "a", "deeper", "x", "extra", "1"))),
			times(1, ask("edge", d("tenant", "t"))),
		)},
		{name: "overrides", reqs: cat(
			times(4, ask("edge", limited(3, typev3.RateLimitUnit_MINUTE, 0, d("ov", "a")))),
			times(2, ask("edge", limited(2, typev3.RateLimitUnit_HOUR, 0, d("small", "ov")))),
			times(2, ask("edge", limited(0, typev3.RateLimitUnit_MINUTE, 0, d("ov", "zero")))),
			times(2, ask("nosuchdomain", limited(3, typev3.RateLimitUnit_MINUTE, 0, d("ov", "a")))),
		)},
		{name: "no-limit", reqs: []request{
			ask("nosuchdomain", d("a", "b")),
			ask("edge", d("unknown", "x")),
			ask("edge", d()),
			ask("edge", d(), d("small", "nl")),
		}},
		{name: "json", reqs: cat(
			times(7, viaJSON(ask("edge", d("small", "j1")))),
			times(3, viaJSON(ask("edge", d("twice", "j"), d("twice", "j")))),
			times(2, viaJSON(ask("edge", d("block", "j")))),
			times(2, viaJSON(ask("edge", d("shadow", "j"), d("free", "j")))),
			times(2, viaJSON(ask("nosuchdomain", d("a", "b")))),
		)},
	}
	if m.name == "plain" {
		s = append(s,
			scenario{name: "shadow-rule-over-stops-others", reqs: cat(
				times(2, ask("edge", d("shadowblock", "y2"), d("small", "h"))),
			)},
			scenario{name: "rate-above-1e9", reqs: cat(
				times(2, ask("edge", d("u_big", "a"))),
				[]request{ask("edge", d("u_max", "a"))},
			)},
			scenario{name: "override-unit-multiplier", reqs: cat(
				times(2, ask("edge", limited(5, typev3.RateLimitUnit_MINUTE, 10, d("ov", "mult")))),
			)},
			scenario{name: "all-or-nothing-repeated", reqs: cat(
				times(8, ask("edge", d("twice", "c"), d("twice", "c"), d("twice", "c"))),
				times(3, ask("edge", d("odd", "b"), d("odd", "b"))),
			)},
			scenario{name: "malformed", reqs: []request{
				ask("", d("small", "m")),
				ask("edge"),
				{body: "{"},
				{body: `{"domain":"edge","descriptors":[{"entries":[{"key":"small","value":"m2"}]}],"bogus":1}`},
				{body: `{"domain":"","descriptors":[{"entries":[{"key":"small","value":"m3"}]}]}`},
				{body: `{"domain":"edge"}`},
				{body: `{"domain":"edge","descriptors":[{"entries":[{"key":"small","value":"m4"}]}]}`},
				{body: `{"domain":"edge","descriptors":[{"entries":[{"key":"small","value":"m5"}]}],"hitsAddend":2}`},
				{body: `{"domain":"edge","descriptors":[{"entries":[{"key":"small","value":"m6"}]}],"hits_addend":"x"}`},
			}},
			scenario{name: "reload", before: reload(reloadRules, "one_per_minute"), reqs: cat(
				times(3, ask("reload", d("one_per_minute", "r1"))),
				times(1, ask("reload", d("block", "r1"))),
				times(1, ask("reload", d("key1", "r1"))),
			)},
			scenario{name: "reload-changed", before: reload(reloadRulesChanged, "two_per_minute"), reqs: cat(
				times(3, ask("reload", d("two_per_minute", "r2"))),
				times(1, ask("reload", d("one_per_minute", "r2"))),
			)},
			// An invalid file: both keep serving the rules they have.
			scenario{name: "reload-invalid", before: breakRules, reqs: cat(
				times(3, ask("reload", d("two_per_minute", "r3"))),
			)},
			// Last: envoyproxy/ratelimit's process panics on it.
			scenario{name: "override-unknown-unit", reqs: []request{
				ask("edge", limited(3, typev3.RateLimitUnit_UNKNOWN, 0, d("ov", "unknown"))),
			}},
		)
	}
	return s
}

const reloadRules = `domain: reload
descriptors:
  - key: key1
    rate_limit: {unit: second, requests_per_unit: 50}
  - key: block
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: one_per_minute
    rate_limit: {unit: minute, requests_per_unit: 1}
`

const reloadRulesChanged = `domain: reload
descriptors:
  - key: two_per_minute
    rate_limit: {unit: minute, requests_per_unit: 2}
`

// breakRules writes an invalid reload.yaml and gives both servers time to
// read it (either way they must keep the rules they serve).
func breakRules(t *testing.T, p *pair) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.dir, "reload.yaml"), []byte(reloadRulesChanged+"  - key: bad\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
}

// reload writes rules to reload.yaml in the pair's rule directory and waits
// until both servers answer with a limit for the key probe (a value no
// scenario counts on: a probe's own request is counted).
func reload(rules, probe string) func(t *testing.T, p *pair) {
	return func(t *testing.T, p *pair) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(p.dir, "reload.yaml"), []byte(rules), 0o644); err != nil {
			t.Fatal(err)
		}
		r := ask("reload", d(probe, "probe"))
		deadline := time.Now().Add(30 * time.Second)
		for _, e := range []endpoint{p.upstream, p.sluice} {
			for {
				a := send(t, e, r)
				if a.failure == "" && a.resp.Statuses[0].CurrentLimit != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the rule directory's change was not served within 30 s: %s", a)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}
