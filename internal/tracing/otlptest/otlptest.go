// Package otlptest is an OTLP gRPC trace collector for tests: the
// collector's protobuf service over a real gRPC listener, keeping every
// span it is sent.
package otlptest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Receiver keeps the spans exported to it. Its methods are safe for
// concurrent use.
type Receiver struct {
	collectorpb.UnimplementedTraceServiceServer
	// Addr is the host:port it listens on; OTEL_EXPORTER_OTLP_ENDPOINT
	// is "http://" + Addr.
	Addr string

	mu       sync.Mutex
	spans    []*tracepb.Span
	resource map[string]string
}

// Start serves a Receiver on a free loopback port until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Addr: ln.Addr().String(), resource: map[string]string{}}
	srv := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(srv, r)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return r
}

// Export implements the collector's TraceService.
func (r *Receiver) Export(ctx context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			r.resource[kv.Key] = Value(kv.Value)
		}
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far, in arrival order.
func (r *Receiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// Resource returns the attributes of the resource of the spans received,
// as Value formats them.
func (r *Receiver) Resource() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]string, len(r.resource))
	for k, v := range r.resource {
		m[k] = v
	}
	return m
}

// Attributes returns a span's attributes as Value formats them.
func Attributes(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = Value(kv.Value)
	}
	return m
}

// Value formats an attribute value: strings as they are, numbers and
// booleans as fmt prints them, lists as "[a b]".
func Value(v *commonpb.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_ArrayValue:
		parts := make([]string, len(x.ArrayValue.Values))
		for i, e := range x.ArrayValue.Values {
			parts[i] = Value(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprint(v)
}

// Traceparent returns a W3C traceparent of a sampled span made from n,
// so that each request of a test has its own trace and parent ids, with
// those ids as bytes.
func Traceparent(n int) (header string, traceID, spanID []byte) {
	tid := fmt.Sprintf("%016x%016x", 0x5100_0000+n, n)
	sid := fmt.Sprintf("%016x", 0xab00+n)
	return "00-" + tid + "-" + sid + "-01", hexBytes(tid), hexBytes(sid)
}

func hexBytes(s string) []byte {
	b := make([]byte, len(s)/2)
	for i := range b {
		fmt.Sscanf(s[2*i:2*i+2], "%02x", &b[i])
	}
	return b
}
