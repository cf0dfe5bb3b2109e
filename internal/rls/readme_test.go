package rls_test

import (
	"math"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/keyname"
)

// The configuration examples of envoyproxy/ratelimit's README, each with
// the requests and answers its text describes, sent over gRPC to a
// running server. The memory store's clock is frozen at the start of
// every window, so per-second limits are exact.

func TestReadmeExample1(t *testing.T) {
	r := start(t, map[string]string{"mongo.yaml": `
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
`}, rigOptions{})
	// "each of them setup a 500 request per second rate limit"
	for _, db := range []string{"users", "default"} {
		if got := r.askN(500, "mongo_cps", desc("database", db)); got != 500 {
			t.Errorf("database=%s: %d of 500 requests OK, want all", db, got)
		}
		resp := r.ask("mongo_cps", desc("database", db))
		if resp.OverallCode != codeOver {
			t.Errorf("database=%s: request 501 is %v, want OVER_LIMIT", db, resp.OverallCode)
		}
		if l := resp.Statuses[0].CurrentLimit; l.GetRequestsPerUnit() != 500 || l.GetUnit() != pb.RateLimitResponse_RateLimit_SECOND {
			t.Errorf("database=%s: current_limit %v, want 500 per SECOND", db, l)
		}
	}
	// A value no descriptor names has no limit.
	resp := r.ask("mongo_cps", desc("database", "orders"))
	if resp.OverallCode != codeOK || resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("database=orders: %v, want OK without a limit", resp)
	}
}

const example2 = `
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`

func TestReadmeExample2(t *testing.T) {
	r := start(t, map[string]string{"messaging.yaml": example2}, rigOptions{})
	marketing := func(n string) *pbDesc { return desc("message_type", "marketing", "to_number", n) }
	// "(message_type, marketing), (to_number, 2061111111) and ... 2062222222
	// will each get 5 requests per day."
	for _, n := range []string{"2061111111", "2062222222"} {
		if got := r.askN(6, "messaging", marketing(n)); got != 5 {
			t.Errorf("marketing to %s: %d of 6 OK, want 5", n, got)
		}
	}
	// "(to_number, 2061111111) and (to_number, 2062222222) both get 100
	// requests per day."
	for _, n := range []string{"2061111111", "2062222222"} {
		if got := r.askN(101, "messaging", desc("to_number", n)); got != 100 {
			t.Errorf("to_number %s: %d of 101 OK, want 100", n, got)
		}
	}
	// Both descriptors in one request: "a logical OR of all the individual
	// rate limit decisions" — and, in sluice, nothing recorded on the
	// others when one is over.
	resp := r.ask("messaging", marketing("2063333333"), desc("to_number", "2063333333"))
	if resp.OverallCode != codeOK || resp.Statuses[0].LimitRemaining != 4 || resp.Statuses[1].LimitRemaining != 99 {
		t.Fatalf("first combined request: %v, want OK with 4 and 99 remaining", resp)
	}
	for range 4 {
		r.ask("messaging", marketing("2063333333"), desc("to_number", "2063333333"))
	}
	resp = r.ask("messaging", marketing("2063333333"), desc("to_number", "2063333333"))
	if resp.OverallCode != codeOver || resp.Statuses[0].Code != codeOver || resp.Statuses[1].Code != codeOK {
		t.Fatalf("sixth combined request: %v, want OVER_LIMIT by the marketing descriptor only", resp)
	}
	if got := resp.Statuses[1].LimitRemaining; got != 95 {
		t.Errorf("to_number remaining after the denied request = %d, want 95 (nothing recorded)", got)
	}
}

type pbDesc = rlv3.RateLimitDescriptor

func TestReadmeExample3(t *testing.T) {
	r := start(t, map[string]string{"edge.yaml": `
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`}, rigOptions{})
	// "This IP would get 10 requests per second as would any other IP."
	for _, ip := range []string{"50.0.0.1", "50.0.0.2"} {
		if got := r.askN(11, "edge_proxy_per_ip", desc("remote_address", ip)); got != 10 {
			t.Errorf("%s: %d of 11 OK, want 10", ip, got)
		}
	}
	// "key/value is always attempted as a match before just key": the
	// black-listed address is over its limit of 0 from the first request.
	resp := r.ask("edge_proxy_per_ip", desc("remote_address", "50.0.0.5"))
	if resp.OverallCode != codeOver || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 0 {
		t.Errorf("50.0.0.5: %v, want OVER_LIMIT under a limit of 0", resp)
	}
}

func TestReadmeExample4(t *testing.T) {
	one := start(t, map[string]string{"e4.yaml": `
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
`}, rigOptions{})
	// "Would not match": the request has two tuples, the configuration one
	// level.
	resp := one.ask("example4", desc("key", "value", "subkey", "subvalue"))
	if resp.OverallCode != codeOK || resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("two tuples against one level: %v, want OK without a limit", resp)
	}
	two := start(t, map[string]string{"e4.yaml": `
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
`}, rigOptions{})
	resp = two.ask("example4", desc("key", "value", "subkey", "subvalue"))
	if resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 300 || resp.Statuses[0].LimitRemaining != 299 {
		t.Errorf("two tuples against two levels: %v, want the 300 per second limit", resp)
	}
	// And the one-tuple request no longer matches anything.
	if resp := two.ask("example4", desc("key", "value")); resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("one tuple against two levels: %v, want no limit", resp)
	}
}

func TestReadmeExample5(t *testing.T) {
	r := start(t, map[string]string{"internal.yaml": `
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
`}, rigOptions{})
	// "an OK status code with the LimitRemaining field set to MaxUint32"
	for range 3 {
		resp := r.ask("internal", desc("ldap", "anything"))
		if resp.OverallCode != codeOK || resp.Statuses[0].LimitRemaining != math.MaxUint32 {
			t.Fatalf("ldap: %v, want OK with MaxUint32 remaining", resp)
		}
	}
	if got := r.askN(101, "internal", desc("azure", "x")); got != 100 {
		t.Errorf("azure: %d of 101 OK, want 100", got)
	}
	r.wantMetric(`sluice_rls_descriptors_total{domain="internal",result="unlimited",rule="ldap"} 3`)
}

func TestReadmeExample6(t *testing.T) {
	r := start(t, map[string]string{"e6.yaml": `
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
`}, rigOptions{})
	// "user-a ... would not get rate-limited regardless of the rate of
	// requests, there would however be statistics related to the breach"
	if got := r.askN(15, "example6", desc("service", "auth-service", "user", "user-a")); got != 15 {
		t.Errorf("user-a: %d of 15 OK, want all (shadow mode)", got)
	}
	r.wantMetric(`sluice_rls_descriptors_total{domain="example6",result="shadow_over_limit",rule="service.user_user-a"} 5`)
	// "user-b would be limited to 20 req / sec however."
	if got := r.askN(21, "example6", desc("service", "auth-service", "user", "user-b")); got != 20 {
		t.Errorf("user-b: %d of 21 OK, want 20", got)
	}
}

func TestReadmeExample7(t *testing.T) {
	r := start(t, map[string]string{"e7.yaml": `
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`}, rigOptions{})
	one := desc("key_1", "value_1", "user", "bkthomps")
	two := desc("key_2", "value_2", "user", "bkthomps")
	// "(key_1, value_1), (key_2, value_2), (user, bkthomps): 10 / sec since
	// the (key_1, value_1), (user, bkthomps) rule was replaced"
	resp := r.ask("example7", one, two)
	if resp.Statuses[0].CurrentLimit != nil || resp.Statuses[1].CurrentLimit.GetRequestsPerUnit() != 10 {
		t.Fatalf("both: %v, want the first replaced and the second at 10 per second", resp)
	}
	if got := r.askN(10, "example7", one, two); got != 9 {
		t.Errorf("both: %d of 10 more OK, want 9 (10 in all)", got)
	}
	// "and this will not affect the 5 / sec limit" of (key_1, value_1),
	// (user, bkthomps).
	if got := r.askN(6, "example7", one); got != 5 {
		t.Errorf("(key_1, value_1), (user, bkthomps): %d of 6 OK, want 5", got)
	}
	// (key_2, value_2), (user, bkthomps): 10 / sec, all used above.
	if resp := r.ask("example7", two); resp.OverallCode != codeOver {
		t.Errorf("(key_2, value_2), (user, bkthomps): %v, want OVER_LIMIT after 10", resp)
	}
}

func TestReadmeExample8(t *testing.T) {
	r := start(t, map[string]string{"e8.yaml": `
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
`}, rigOptions{})
	// "(key_1, unspecified_value): 10 / sec, (key_1, unspecified_value2):
	// 10 / sec, (key_1, value_1): 20 / sec" (the file says per minute).
	for v, want := range map[string]int{"unspecified_value": 10, "unspecified_value2": 10, "value1": 20} {
		if got := r.askN(want+1, "example8", desc("key1", v)); got != want {
			t.Errorf("key1=%s: %d of %d OK, want %d", v, got, want+1, want)
		}
	}
	// "The metrics keys will be ... key1_unspecified_value,
	// key1_unspecified_value2, key1_value1": sluice writes the digest of a
	// value the request chose (keyname.Of), never the value itself.
	for _, key := range []string{"key1_" + keyname.Of("unspecified_value"), "key1_" + keyname.Of("unspecified_value2"), "key1_value1"} {
		r.wantMetric(`sluice_rls_descriptors_total{domain="example8",result="ok",rule="` + key + `"}`)
	}
}

func TestReadmeExample9(t *testing.T) {
	r := start(t, map[string]string{"e9.yaml": `
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: key2
    value: value*
    share_threshold: true
    rate_limit:
      unit: minute
      requests_per_unit: 20
`}, rigOptions{})
	// "(key_1, value_1): 20 / sec, (key_1, value_2): 20 / sec" (the file
	// says per minute): one counter per value.
	for _, v := range []string{"value_1", "value_2"} {
		if got := r.askN(21, "example9", desc("key1", v)); got != 20 {
			t.Errorf("key1=%s: %d of 21 OK, want 20", v, got)
		}
	}
	if resp := r.ask("example9", desc("key1", "other")); resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("key1=other: %v, want no limit (no prefix match)", resp)
	}
	// share_threshold: every value the wildcard matches shares one counter.
	a := r.askN(15, "example9", desc("key2", "value_1"))
	b := r.askN(15, "example9", desc("key2", "value_2"))
	if a != 15 || b != 5 {
		t.Errorf("key2 with share_threshold: %d and %d OK, want 15 and 5 (20 shared)", a, b)
	}
}

func TestReadmeExample10(t *testing.T) {
	r := start(t, map[string]string{"e10.yaml": `
domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit:
              unit: minute
              requests_per_unit: 60
`, "e10w.yaml": `
domain: example10_wildcard
descriptors:
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit:
              unit: minute
              requests_per_unit: 100
`}, rigOptions{})
	r.ask("example10", desc("route", "api", "http_method", "GET", "subject_id", "123"))
	r.ask("example10", desc("route", "web", "http_method", "POST", "subject_id", "456"))
	r.ask("example10_wildcard", desc("user", "alice", "action", "readfile", "resource", "documents"))
	// "Metric key: example10.route_api.http_method_GET.subject_id" and so
	// on; sluice puts the domain in its own label and the digests of the
	// request's values (keyname.Of) in place of the values.
	d := keyname.Of
	r.wantMetric(`sluice_rls_descriptors_total{domain="example10",result="ok",rule="route_` + d("api") + `.http_method_` + d("GET") + `.subject_id"} 1`)
	r.wantMetric(`sluice_rls_descriptors_total{domain="example10",result="ok",rule="route_` + d("web") + `.http_method_` + d("POST") + `.subject_id"} 1`)
	r.wantMetric(`sluice_rls_descriptors_total{domain="example10_wildcard",result="ok",rule="user_` + d("alice") + `.action_` + d("readfile") + `.resource"} 1`)
}

func TestReadmeExample11(t *testing.T) {
	r := start(t, map[string]string{"e11.yaml": `
domain: example11
descriptors:
  # With share_threshold: true, all files/* matches share the same threshold
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10

  # Without share_threshold, each files_no_share/* match has its own isolated threshold
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
`}, rigOptions{})
	// "If 5 requests are made for files/a.pdf and 5 requests for
	// files/b.csv, a request for files/c.txt will be rate limited"
	a := r.askN(5, "example11", desc("files", "files/a.pdf"))
	b := r.askN(5, "example11", desc("files", "files/b.csv"))
	if a != 5 || b != 5 {
		t.Fatalf("a.pdf, b.csv: %d and %d of 5 OK, want 5 and 5", a, b)
	}
	if resp := r.ask("example11", desc("files", "files/c.txt")); resp.OverallCode != codeOver {
		t.Errorf("files/c.txt: %v, want OVER_LIMIT (the shared 10 are used)", resp)
	}
	// "If 10 requests are made for files_no_share/a.pdf (exhausting its
	// quota), requests for files_no_share/b.csv will still be allowed (up
	// to 10 requests)"
	if got := r.askN(11, "example11", desc("files_no_share", "files_no_share/a.pdf")); got != 10 {
		t.Errorf("files_no_share/a.pdf: %d of 11 OK, want 10", got)
	}
	if got := r.askN(11, "example11", desc("files_no_share", "files_no_share/b.csv")); got != 10 {
		t.Errorf("files_no_share/b.csv: %d of 11 OK, want 10", got)
	}
}
