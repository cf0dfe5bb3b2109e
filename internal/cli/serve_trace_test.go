package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/tracing/otlptest"
)

var proxyBannerRE = regexp.MustCompile(`sluice: serving proxy on (http://\S+)`)

const traceConfig = `
listeners:
  - {addr: 127.0.0.1:0, serve: api}
  - {addr: 127.0.0.1:0, serve: proxy}
  - {addr: 127.0.0.1:0, serve: grpc}
rls:
  config_dir: %s
zones:
  - name: hidden
    limits: [1r/m]
    key: header:X-User
  - name: shown
    limits: [5r/m]
    key: header:X-User
    show_keys: true
  - name: viewed
    limits: [100r/m]
    key: header:X-User
    mode: async
proxy:
  upstream: %s
  rules:
    - path_prefix: /
      zones: [hidden]
`

// TestServeTracing runs "sluice serve" with the standard OTEL_*
// environment pointing at an OTLP receiver, sends each traced kind of
// request with a sampled traceparent, and checks the spans the receiver
// gets: one server span per request, child of the caller's span, with the
// documented attributes and no key of a zone without show_keys. The
// sampler (parent-based, ratio 0) drops a request that comes without a
// traceparent.
func TestServeTracing(t *testing.T) {
	rcv := otlptest.Start(t)
	addr := rcv.Addr
	// The exporter and the resource read the process environment; the
	// sampler is read through Env, as the switch.
	vars := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr,
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0",
		"OTEL_SERVICE_NAME":           "sluice-under-test",
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	upstreamParent := make(chan string, 1) // the traceparent the proxy sends upstream
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case upstreamParent <- r.Header.Get("Traceparent"):
		default:
		}
		io.WriteString(w, "upstream\n")
	}))
	defer upstream.Close()
	rules := writeRuleDir(t, map[string]string{"rl.yaml": "domain: rl\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"})
	cfgPath := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(traceConfig, rules, upstream.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, stop := serveInProcess(t, vars, "-config", cfgPath)
	api := waitFor(t, stdout, stderr, apiBannerRE)[1]
	proxy := waitFor(t, stdout, stderr, proxyBannerRE)[1]
	grpcAddr := waitFor(t, stdout, stderr, grpcBannerRE)[1]

	type want struct {
		name  string
		attrs map[string]string
	}
	var wants []want
	send := func(method, url, body, user string, w want) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("X-User", user)
		if w.name != "" {
			tp, _, _ := otlptest.Traceparent(len(wants))
			req.Header.Set("Traceparent", tp)
			wants = append(wants, w)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	check := func(zone, key string) string { return fmt.Sprintf(`{"zone":%q,"key":%q}`, zone, key) }

	send("POST", api+"/v1/check", check("hidden", "secret-a"), "", want{"POST /v1/check", map[string]string{
		"sluice.zones": "[hidden]", "sluice.decision": "allowed", "sluice.source": "store", "http.response.status_code": "200", "http.route": "/v1/check"}})
	send("POST", api+"/v1/check", check("hidden", "secret-a"), "", want{"POST /v1/check", map[string]string{
		"sluice.decision": "denied", "sluice.source": "store", "http.response.status_code": "429"}})
	send("POST", api+"/v1/check", check("shown", "visible-key"), "", want{"POST /v1/check", map[string]string{
		"sluice.zones": "[shown]", "sluice.keys": "[visible-key]", "sluice.decision": "allowed"}})
	// An async zone makes a key's view at its third answer from the
	// store; the fourth check is decided from that view.
	send("POST", api+"/v1/check", check("viewed", "secret-b"), "", want{})
	send("POST", api+"/v1/check", check("viewed", "secret-b"), "", want{})
	send("POST", api+"/v1/check", check("viewed", "secret-b"), "", want{})
	send("POST", api+"/v1/check", check("viewed", "secret-b"), "", want{"POST /v1/check", map[string]string{
		"sluice.zones": "[viewed]", "sluice.source": "local-view", "sluice.decision": "allowed"}})
	send("GET", api+"/v1/auth?zone=hidden", "", "secret-c", want{"GET /v1/auth", map[string]string{
		"sluice.zones": "[hidden]", "sluice.decision": "allowed", "sluice.source": "store", "http.response.status_code": "204"}})
	send("GET", api+"/v1/auth?zone=hidden", "", "", want{"GET /v1/auth", map[string]string{
		"sluice.decision": "undecided", "http.response.status_code": "401"}})
	send("GET", proxy+"/some/secret-path?token=secret-q", "", "secret-d", want{"GET proxy", map[string]string{
		"sluice.zones": "[hidden]", "sluice.decision": "allowed", "http.response.status_code": "200", "http.route": "proxy"}})
	send("POST", api+"/json", `{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"secret-e"}]}]}`, "", want{"POST /json", map[string]string{
		"sluice.source": "store", "http.response.status_code": "200"}})
	send("POST", api+"/v1/check", check("hidden", "secret-untraced"), "", want{}) // no traceparent: not sampled

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tp, _, _ := otlptest.Traceparent(len(wants))
	wants = append(wants, want{"envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", map[string]string{
		"sluice.domain": "rl", "sluice.decision": "allowed", "sluice.source": "store", "rpc.system": "grpc", "rpc.grpc.status_code": "0"}})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", tp)
	_, err = rlspb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "rl",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "secret-f"}}}}})
	if err != nil {
		t.Fatal(err)
	}

	if code := stop(); code != 0 { // flushes the spans
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr)
	}
	spans := rcv.Spans()
	if len(spans) != len(wants) {
		for _, s := range spans {
			t.Logf("span %s trace %x %v", s.Name, s.TraceId, otlptest.Attributes(s))
		}
		t.Fatalf("the receiver got %d spans, want %d (one per traced request)", len(spans), len(wants))
	}
	for i, w := range wants {
		_, traceID, parentID := otlptest.Traceparent(i)
		j := slices.IndexFunc(spans, func(s *tracepb.Span) bool { return string(s.TraceId) == string(traceID) })
		if j < 0 {
			t.Errorf("request %d (%s): no span in its trace", i, w.name)
			continue
		}
		s := spans[j]
		if string(s.ParentSpanId) != string(parentID) || s.Kind != tracepb.Span_SPAN_KIND_SERVER || s.Name != w.name {
			t.Errorf("request %d: span %q kind %v parent %x, want %q, a server span, parent %x", i, s.Name, s.Kind, s.ParentSpanId, w.name, parentID)
		}
		got := otlptest.Attributes(s)
		for k, v := range w.attrs {
			if got[k] != v {
				t.Errorf("request %d (%s): %s = %q, want %q; attributes %v", i, w.name, k, got[k], v, got)
			}
		}
		if w.attrs["sluice.source"] == "store" && got["sluice.store.duration"] == "" {
			t.Errorf("request %d (%s): no sluice.store.duration; attributes %v", i, w.name, got)
		}
		if w.name == "GET proxy" {
			// The upstream's parent is sluice's span, in the same trace.
			if up, want := <-upstreamParent, fmt.Sprintf("00-%x-%x-01", traceID, s.SpanId); up != want {
				t.Errorf("the upstream got traceparent %q, want %q", up, want)
			}
		}
		for k, v := range got {
			if strings.Contains(v, "secret") {
				t.Errorf("request %d (%s): attribute %s = %q holds a key or a path", i, w.name, k, v)
			}
		}
	}
	if res := rcv.Resource(); res["service.name"] != "sluice-under-test" {
		t.Errorf("resource service.name %q, want OTEL_SERVICE_NAME's", res["service.name"])
	}
}
