package server

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/tracing/otlptest"
)

// TestTraceSourcesRedis checks the span attributes of the sources a Redis
// store adds to the memory store's: a denial repeated from the deny
// cache (no store call), and the failure policies deciding while Redis
// is down, with the failed store call's error class.
func TestTraceSourcesRedis(t *testing.T) {
	rcv := otlptest.Start(t)
	env := map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_always_off"}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+rcv.Addr)
	tr, err := tracing.New(t.Context(), "test", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	r := redistest.Standalone(t)
	// A timeout no scheduling delay of a busy machine reaches: the calls
	// after Kill fail at once, refused.
	ts := start(t, parseConfig(t, `
store: {url: "`+r.URL()+`", timeout: 5s}
listeners: [{addr: "127.0.0.1:0"}]
zones:
  - {name: open, limits: 1r/m}
  - {name: closed, limits: 1r/m, failure: closed}
  - {name: local, limits: 1r/m, failure: local}
`), Options{Tracer: tr})

	type want struct{ decision, source, storeErr string }
	var wants []want
	check := func(zone, key string, w want) {
		t.Helper()
		tp, _, _ := otlptest.Traceparent(len(wants))
		wants = append(wants, w)
		req, err := http.NewRequest(http.MethodPost, ts.api+"/v1/check", strings.NewReader(`{"zone":"`+zone+`","key":"`+key+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", tp)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	check("open", "k1", want{"allowed", "store", ""})
	check("open", "k1", want{"denied", "store", ""})
	check("open", "k1", want{"denied", "deny-cache", ""})
	r.Kill()
	check("open", "k2", want{"allowed", "fail-open", "any"})
	check("closed", "k3", want{"denied", "fail-closed", ""})
	check("local", "k4", want{"allowed", "fallback", ""})
	if err := tr.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}

	spans := rcv.Spans()
	if len(spans) != len(wants) {
		t.Fatalf("%d spans, want %d", len(spans), len(wants))
	}
	for i, w := range wants {
		_, traceID, parentID := otlptest.Traceparent(i)
		j := slices.IndexFunc(spans, func(s *tracepb.Span) bool { return string(s.TraceId) == string(traceID) })
		if j < 0 || string(spans[j].ParentSpanId) != string(parentID) {
			t.Errorf("check %d: no span child of its traceparent", i)
			continue
		}
		got := otlptest.Attributes(spans[j])
		if got["sluice.decision"] != w.decision || got["sluice.source"] != w.source {
			t.Errorf("check %d: decision %q from %q, want %q from %q; attributes %v", i, got["sluice.decision"], got["sluice.source"], w.decision, w.source, got)
		}
		switch {
		case w.source == "deny-cache" && got["sluice.store.duration"] != "":
			t.Errorf("check %d: a store call recorded for a deny-cache decision: %v", i, got)
		case w.source == "store" && got["sluice.store.duration"] == "":
			t.Errorf("check %d: no store call recorded: %v", i, got)
		case w.storeErr != "" && !slices.Contains([]string{"unavailable", "timeout"}, got["sluice.store.error"]):
			t.Errorf("check %d: sluice.store.error %q, want the failed call's class: %v", i, got["sluice.store.error"], got)
		}
		for k, v := range got {
			if strings.Contains(v, r.Addr()) || slices.Contains([]string{"k1", "k2", "k3", "k4"}, v) {
				t.Errorf("check %d: attribute %s = %q names a key or the store's address", i, k, v)
			}
		}
	}
}
