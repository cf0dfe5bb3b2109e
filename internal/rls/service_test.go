package rls_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

const apiRules = `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
    descriptors:
      - key: path
        value: /search*
        rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100}
`

func TestHitsAddend(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	// Request-level addend.
	resp := r.call(&pb.RateLimitRequest{Domain: "api", HitsAddend: 4, Descriptors: []*pbDesc{desc("user", "ann")}})
	if resp.OverallCode != codeOK || resp.Statuses[0].LimitRemaining != 6 {
		t.Fatalf("hits_addend 4: %v, want OK with 6 remaining", resp)
	}
	// A descriptor's own addend overrides it; 0 peeks and records nothing.
	for range 3 {
		resp = r.call(&pb.RateLimitRequest{Domain: "api", HitsAddend: 4, Descriptors: []*pbDesc{withAddend(desc("user", "ann"), 0)}})
		if resp.OverallCode != codeOK || resp.Statuses[0].LimitRemaining != 6 {
			t.Fatalf("peek: %v, want OK with 6 still remaining", resp)
		}
	}
	// An addend that does not fit is over the limit and records nothing.
	resp = r.call(&pb.RateLimitRequest{Domain: "api", Descriptors: []*pbDesc{withAddend(desc("user", "ann"), 7)}})
	if resp.OverallCode != codeOver {
		t.Fatalf("addend 7 of 6 remaining: %v, want OVER_LIMIT", resp)
	}
	resp = r.call(&pb.RateLimitRequest{Domain: "api", Descriptors: []*pbDesc{withAddend(desc("user", "ann"), 6)}})
	if resp.OverallCode != codeOK || resp.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("addend 6 of 6 remaining: %v, want OK with 0 remaining", resp)
	}
	// An addend above the rate can never pass; the other descriptor is
	// peeked, not charged.
	resp = r.call(&pb.RateLimitRequest{Domain: "api", HitsAddend: 11, Descriptors: []*pbDesc{desc("user", "bob"), desc("tenant", "t")}})
	if resp.OverallCode != codeOver || resp.Statuses[0].Code != codeOver || resp.Statuses[1].LimitRemaining != 100 {
		t.Fatalf("addend 11 over a rate of 10: %v, want OVER_LIMIT and tenant untouched", resp)
	}
}

// TestDifferentAddends: limited descriptors that ask
// for different hits_addend values are decided, one check per addend, all
// or nothing: before, the request was refused with INVALID_ARGUMENT, which
// Envoy's default failure_mode_deny: false lets through unlimited.
func TestDifferentAddends(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	ask := func(descs ...*pbDesc) *pb.RateLimitResponse {
		t.Helper()
		return r.call(&pb.RateLimitRequest{Domain: "api", Descriptors: descs})
	}
	peek := func(descs ...*pbDesc) []uint32 {
		t.Helper()
		for i, d := range descs {
			descs[i] = withAddend(d, 0)
		}
		var out []uint32
		for _, st := range ask(descs...).Statuses {
			out = append(out, st.LimitRemaining)
		}
		return out
	}
	// Each descriptor is charged its own addend.
	if resp := ask(withAddend(desc("user", "cy"), 1), withAddend(desc("tenant", "t"), 2)); resp.OverallCode != codeOK {
		t.Fatalf("addends 1 and 2: %v, want OK", resp)
	}
	if got := peek(desc("user", "cy"), desc("tenant", "t")); got[0] != 9 || got[1] != 98 {
		t.Fatalf("after addends 1 and 2: remaining %v, want [9 98]", got)
	}
	// One short descriptor denies the request, and nothing is recorded.
	ask(withAddend(desc("user", "dee"), 9))
	resp := ask(withAddend(desc("user", "dee"), 2), withAddend(desc("tenant", "u"), 5))
	if resp.OverallCode != codeOver || resp.Statuses[0].Code != codeOver || resp.Statuses[1].Code != codeOK || resp.Statuses[1].LimitRemaining != 100 {
		t.Fatalf("user short of 2: %v, want OVER_LIMIT on user and tenant untouched", resp)
	}
	if got := peek(desc("user", "dee"), desc("tenant", "u")); got[0] != 1 || got[1] != 100 {
		t.Fatalf("after the denial: remaining %v, want [1 100]: nothing recorded", got)
	}
	if resp := ask(withAddend(desc("user", "dee"), 1), withAddend(desc("tenant", "u"), 5)); resp.OverallCode != codeOK {
		t.Fatalf("addends that fit: %v, want OK", resp)
	}
	if got := peek(desc("user", "dee"), desc("tenant", "u")); got[0] != 0 || got[1] != 95 {
		t.Fatalf("after addends 1 and 5: remaining %v, want [0 95]", got)
	}
	// One counter asked for by two descriptors with different addends
	// counts both, as two requests would.
	if resp := ask(withAddend(desc("user", "eve"), 1), withAddend(desc("user", "eve"), 2)); resp.OverallCode != codeOK {
		t.Fatalf("one counter, addends 1 and 2: %v, want OK", resp)
	}
	if got := peek(desc("user", "eve")); got[0] != 7 {
		t.Fatalf("one counter after addends 1 and 2: remaining %v, want [7]", got)
	}
}

func TestNestedWildcardAllOrNothing(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	search := desc("user", "ann", "path", "/search?q=1")
	user := desc("user", "ann")
	for i := range 3 {
		resp := r.ask("api", user, search)
		if resp.OverallCode != codeOK || resp.Statuses[1].CurrentLimit.GetRequestsPerUnit() != 3 {
			t.Fatalf("request %d: %v, want OK under the 3 per minute wildcard limit", i, resp)
		}
	}
	resp := r.ask("api", user, search)
	if resp.OverallCode != codeOver || resp.Statuses[0].Code != codeOK || resp.Statuses[1].Code != codeOver {
		t.Fatalf("fourth search: %v, want OVER_LIMIT by the search descriptor", resp)
	}
	if got := resp.Statuses[0].LimitRemaining; got != 7 {
		t.Errorf("user remaining after the denied request = %d, want 7 (nothing recorded)", got)
	}
	if d := resp.Statuses[1].DurationUntilReset.AsDuration(); d <= 0 || d > 2*time.Minute {
		t.Errorf("duration_until_reset of the denial = %v, want the wait, in (0, 2m]", d)
	}
	// Response headers: envoyproxy/ratelimit's, of the descriptor over
	// its limit.
	h := map[string]string{}
	for _, hv := range resp.ResponseHeadersToAdd {
		h[hv.Key] = hv.Value
	}
	if len(h) != 3 || h["RateLimit-Limit"] != "3" || h["RateLimit-Remaining"] != "0" || h["RateLimit-Reset"] == "" {
		t.Errorf("response_headers_to_add = %v, want RateLimit-Limit 3, RateLimit-Remaining 0 and RateLimit-Reset", h)
	}
	// Another path of the same user has no nested rule: no limit.
	if resp := r.ask("api", desc("user", "ann", "path", "/home")); resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("/home: %v, want no limit", resp)
	}
}

func TestSlidingWindow(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	if got := r.askN(10, "api", desc("user", "sam")); got != 10 {
		t.Fatalf("%d of 10 OK", got)
	}
	// A fixed window would start over at the minute; the sliding window
	// still weighs the previous minute: 10·(60−6)/60 = 9 at 6 s in, so one
	// request fits at 6 s, and none before.
	r.clock.Advance(time.Minute + 5*time.Second)
	if resp := r.ask("api", desc("user", "sam")); resp.OverallCode != codeOver {
		t.Fatalf("at 1m05s: %v, want OVER_LIMIT (sliding window)", resp)
	}
	r.clock.Advance(time.Second)
	if resp := r.ask("api", desc("user", "sam")); resp.OverallCode != codeOK {
		t.Fatalf("at 1m06s: %v, want OK", resp)
	}
}

func TestAlgorithmPerDomain(t *testing.T) {
	r := start(t, map[string]string{"g.yaml": `
domain: g
algorithm: gcra
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 10}
`}, rigOptions{})
	if got := r.askN(11, "g", desc("k", "a")); got != 10 {
		t.Fatalf("%d of 11 OK, want 10", got)
	}
	// GCRA: one request back every 6 s, not after the window.
	r.clock.Advance(6 * time.Second)
	if got := r.askN(2, "g", desc("k", "a")); got != 1 {
		t.Errorf("after 6 s: %d of 2 OK, want 1", got)
	}
}

func TestUnknownDomainAndBadRequests(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	if resp := r.ask("nope", desc("user", "a")); resp.OverallCode != codeOK || resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("unknown domain: %v, want OK without limits", resp)
	}
	for name, req := range map[string]*pb.RateLimitRequest{
		"no domain":      {Descriptors: []*pbDesc{desc("user", "a")}},
		"no descriptors": {Domain: "api"},
	} {
		if _, err := r.client.ShouldRateLimit(context.Background(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: err %v, want InvalidArgument", name, err)
		}
	}
}

func TestJSONEndpoint(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	body := `{"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "jo", "unused": 1}]}]}`
	post := func(body string) (int, string, http.Header) {
		t.Helper()
		resp, err := http.Post(r.api+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	if code, _, _ := post(body); code != http.StatusBadRequest {
		t.Errorf("unknown field: status %d, want 400", code)
	}
	body = `{"domain": "api", "hits_addend": 10, "descriptors": [{"entries": [{"key": "user", "value": "jo"}]}]}`
	code, text, _ := post(body)
	if code != http.StatusOK {
		t.Fatalf("first: status %d %s, want 200", code, text)
	}
	var got struct {
		OverallCode string `json:"overallCode"`
		Statuses    []struct {
			Code         string `json:"code"`
			CurrentLimit struct {
				RequestsPerUnit int    `json:"requestsPerUnit"`
				Unit            string `json:"unit"`
			} `json:"currentLimit"`
		} `json:"statuses"`
	}
	if err := json.Unmarshal([]byte(text), &got); err != nil || got.OverallCode != "OK" || got.Statuses[0].CurrentLimit.Unit != "MINUTE" {
		t.Fatalf("first: body %s (%v), want overallCode OK with a MINUTE limit", text, err)
	}
	code, text, h := post(strings.Replace(body, `"hits_addend": 10`, `"hitsAddend": 1`, 1))
	// The response headers are for Envoy to add: in the body only.
	if code != http.StatusTooManyRequests || !strings.Contains(text, `"overallCode":"OVER_LIMIT"`) || !strings.Contains(text, `"key":"RateLimit-Remaining"`) || h.Get("RateLimit-Remaining") != "" {
		t.Fatalf("second: status %d %s, RateLimit-Remaining header %q; want 429 OVER_LIMIT with the headers in the body only", code, text, h.Get("RateLimit-Remaining"))
	}
}

func TestHealthAndReflection(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		resp, err := healthpb.NewHealthClient(r.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v %v, want SERVING", svc, resp, err)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(r.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "envoy.service.ratelimit.v3.RateLimitService") {
		t.Errorf("reflection lists %v, want the rate-limit service", names)
	}
}

func TestReload(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	r.write("more.yaml", "domain: more\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	if err := r.srv.ReloadRLS(); err != nil {
		t.Fatal(err)
	}
	if got := r.askN(2, "more", desc("k", "v")); got != 1 {
		t.Errorf("new domain after reload: %d of 2 OK, want 1", got)
	}
	r.write("bad.yaml", "domain: bad\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	err := r.srv.ReloadRLS()
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:4") || !strings.Contains(err.Error(), `unknown unit "fortnight"`) {
		t.Fatalf("bad file: err %v, want bad.yaml:4 and the unit", err)
	}
	if resp := r.ask("more", desc("k", "v")); resp.Statuses[0].CurrentLimit == nil {
		t.Errorf("after a failed reload the running rules must stay: %v", resp)
	}
}

func TestWatchReloadsTheDirectory(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{watch: 20 * time.Millisecond})
	r.write("late.yaml", "domain: late\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n")
	deadline := time.Now().Add(10 * time.Second)
	for r.ask("late", desc("k", "v")).Statuses[0].CurrentLimit == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the new file was not served within 10 s; log:\n%s", r.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.wantMetric(`sluice_config_reloads_total{result="ok"} `)
}

func TestBlockListPeek(t *testing.T) {
	r := start(t, map[string]string{"b.yaml": "domain: b\ndescriptors:\n  - key: ip\n    value: 1.2.3.4\n    rate_limit: {unit: second, requests_per_unit: 0}\n  - key: ip\n    rate_limit: {unit: second, requests_per_unit: 5}\n"}, rigOptions{})
	// A peek at a block-listed address is over its limit too, and is not
	// an error; the other descriptor is peeked, not charged.
	resp := r.call(&pb.RateLimitRequest{Domain: "b", Descriptors: []*pbDesc{withAddend(desc("ip", "1.2.3.4"), 0), desc("ip", "5.6.7.8")}})
	if resp.OverallCode != codeOver || resp.Statuses[0].Code != codeOver || resp.Statuses[1].LimitRemaining != 5 {
		t.Errorf("%v, want OVER_LIMIT by the block list and 5.6.7.8 untouched", resp)
	}
}

func TestJSONNeedsJSONContentType(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	resp, err := http.Post(r.api+"/json", "text/plain", strings.NewReader(`{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"x"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: status %d, want 415", resp.StatusCode)
	}
	if got := r.ask("api", desc("user", "x")).Statuses[0].LimitRemaining; got != 9 {
		t.Errorf("remaining after the refused post and one request = %d, want 9", got)
	}
}

func TestLimitOverride(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	// A descriptor that carries its own limit: used whatever the rules say
	// (here, none would match).
	over := desc("route", "checkout")
	over.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE}
	if got := r.askN(3, "api", over); got != 2 {
		t.Errorf("override of 2 per minute: %d of 3 OK, want 2", got)
	}
	if l := r.ask("api", over).Statuses[0].CurrentLimit; l.GetRequestsPerUnit() != 2 || l.GetUnit() != pb.RateLimitResponse_RateLimit_MINUTE {
		t.Errorf("current_limit %v, want the override", l)
	}
	r.wantMetric(`sluice_rls_descriptors_total{domain="api",result="over_limit",rule="override:route"}`)
	// YEAR is 365 days, as envoyproxy/ratelimit reads it.
	year := desc("route", "x")
	year.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_YEAR}
	if l := r.ask("api", year).Statuses[0].CurrentLimit; l.GetUnit() != pb.RateLimitResponse_RateLimit_YEAR {
		t.Errorf("a YEAR override: current_limit %v, want YEAR", l)
	}
	bad := desc("route", "x")
	bad.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_UNKNOWN}
	if _, err := r.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "api", Descriptors: []*pbDesc{bad}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an UNKNOWN override unit: err %v, want InvalidArgument", err)
	}
}

func TestGlobalShadowMode(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules + "  - key: blocked\n    rate_limit: {unit: second, requests_per_unit: 0}\n"}, rigOptions{shadow: true})
	if got := r.askN(12, "api", desc("user", "z")); got != 12 {
		t.Errorf("global shadow mode: %d of 12 OK, want all", got)
	}
	if got := r.askN(2, "api", desc("blocked", "z")); got != 2 {
		t.Errorf("global shadow mode, a limit of 0: %d of 2 OK, want all", got)
	}
	r.wantMetric(`sluice_rls_descriptors_total{domain="api",result="shadow_over_limit",rule="user"} 2`)
	r.wantMetric(`sluice_rls_descriptors_total{domain="api",result="shadow_over_limit",rule="blocked"} 2`)
}

// TestSameCounterKeepsTheStricterLimit: two descriptors that select the
// same counter (the same entries, here with limit overrides of 5 and 2 per
// minute) are one hit of the check, charged once per descriptor as
// envoyproxy/ratelimit charges them; the hit takes the stricter limit, so
// neither descriptor's limit is dropped.
func TestSameCounterKeepsTheStricterLimit(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	override := func(n uint32) *pbDesc {
		d := desc("route", "checkout")
		d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: typev3.RateLimitUnit_MINUTE}
		return d
	}
	if got := r.askN(4, "api", override(5), override(2)); got != 1 {
		t.Errorf("overrides of 5 and 2 per minute on one counter: %d of 4 OK, want 1 (2 charged per request)", got)
	}
	if got := r.askN(4, "api", override(5)); got != 3 {
		t.Errorf("then the counter alone under 5 per minute: %d of 4 OK, want 3 (2 recorded)", got)
	}
}

// TestDifferentAddendsSplit: an addend group with more hits than one sluice
// check takes is itself split (checkAll), and every descriptor is charged
// its own addend.
func TestDifferentAddendsSplit(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{})
	var descs []*pbDesc
	for i := range 18 {
		descs = append(descs, withAddend(desc("tenant", fmt.Sprint("t", i)), 1))
	}
	descs = append(descs, withAddend(desc("tenant", "x"), 2))
	if resp := r.call(&pb.RateLimitRequest{Domain: "api", Descriptors: descs}); resp.OverallCode != codeOK {
		t.Fatalf("19 descriptors, addends 1 and 2: %v, want OK", resp)
	}
	for i, d := range descs {
		descs[i] = withAddend(d, 0)
	}
	resp := r.call(&pb.RateLimitRequest{Domain: "api", Descriptors: descs})
	for i, st := range resp.Statuses {
		want := uint32(99)
		if i == 18 {
			want = 98
		}
		if st.LimitRemaining != want {
			t.Errorf("descriptor %d: remaining %d, want %d", i, st.LimitRemaining, want)
		}
	}
}

// TestAsEnvoyRatelimitAnswers: the answers envoyproxy/ratelimit gives
// (internal/rls/difftest compares them with the real one): a counter named
// twice in a request is charged twice, each occurrence reporting its own
// count; a descriptor over its limit reports 0 remaining; one that can
// never pass has a duration_until_reset; the response headers are those of
// the descriptor closest to its limit.
func TestAsEnvoyRatelimitAnswers(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules + "  - key: blocked\n    rate_limit: {unit: minute, requests_per_unit: 0}\n"}, rigOptions{})
	resp := r.ask("api", desc("user", "twice"), desc("user", "twice"))
	if resp.OverallCode != codeOK || resp.Statuses[0].LimitRemaining != 9 || resp.Statuses[1].LimitRemaining != 8 {
		t.Errorf("one counter twice: %v, want OK with 9 then 8 remaining", resp)
	}
	if resp = r.ask("api", withAddend(desc("user", "twice"), 7)); resp.OverallCode != codeOK || resp.Statuses[0].LimitRemaining != 1 {
		t.Errorf("7 asked, 8 left: %v, want OK with 1 remaining", resp)
	}
	resp = r.ask("api", withAddend(desc("user", "twice"), 2))
	if resp.OverallCode != codeOver || resp.Statuses[0].LimitRemaining != 0 || resp.Statuses[0].DurationUntilReset == nil {
		t.Errorf("2 asked, 1 left: %v, want OVER_LIMIT with 0 remaining and a reset", resp)
	}
	resp = r.ask("api", desc("blocked", "x"), desc("tenant", "t"))
	if resp.OverallCode != codeOver || resp.Statuses[0].DurationUntilReset.AsDuration() != time.Minute || resp.Statuses[1].LimitRemaining != 100 {
		t.Errorf("a limit of 0: %v, want OVER_LIMIT with a minute's reset, the tenant's 100 untouched", resp)
	}
	h := map[string]string{}
	for _, hv := range resp.ResponseHeadersToAdd {
		h[hv.Key] = hv.Value
	}
	if len(h) != 3 || h["RateLimit-Limit"] != "0" || h["RateLimit-Remaining"] != "0" || h["RateLimit-Reset"] != "60" {
		t.Errorf("headers %v, want those of the blocked descriptor: 0, 0, 60", h)
	}
}

// TestGlobalShadowModeKeepsDescriptorCodes: under rls.shadow_mode a
// descriptor over its limit is OVER_LIMIT in its status, as with
// envoyproxy/ratelimit's SHADOW_MODE, and only overall_code is OK; the
// request is counted as without it (a denied one records nothing).
func TestGlobalShadowModeKeepsDescriptorCodes(t *testing.T) {
	r := start(t, map[string]string{"api.yaml": apiRules}, rigOptions{shadow: true})
	for i := range 10 {
		if resp := r.ask("api", desc("user", "s")); resp.OverallCode != codeOK || resp.Statuses[0].Code != codeOK || resp.Statuses[0].LimitRemaining != uint32(9-i) {
			t.Fatalf("request %d: %v, want OK with %d remaining", i, resp, 9-i)
		}
	}
	resp := r.ask("api", desc("user", "s"), desc("tenant", "s"))
	if resp.OverallCode != codeOK || resp.Statuses[0].Code != codeOver || resp.Statuses[1].Code != codeOK || resp.Statuses[1].LimitRemaining != 100 {
		t.Errorf("over the limit in shadow mode: %v, want overall OK, the user OVER_LIMIT, the tenant OK with 100 remaining", resp)
	}
}
