package tracing

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

// BenchmarkHTTPUnsampled measures what Tracer.HTTP adds to a request
// that starts a trace and is not sampled (ratio 0): the "on" handler
// beside the bare one ("off").
func BenchmarkHTTPUnsampled(b *testing.B) {
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	b.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
	b.Setenv("OTEL_TRACES_SAMPLER_ARG", "0")
	tr, err := New(b.Context(), "bench", os.Getenv)
	if err != nil {
		b.Fatal(err)
	}
	nop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	req := httptest.NewRequest("POST", "/v1/check", nil)
	for _, bb := range []struct {
		name string
		h    http.Handler
	}{{"off", nop}, {"on", tr.HTTP("/v1/check", nop)}} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bb.h.ServeHTTP(nil, req)
			}
		})
	}
}
