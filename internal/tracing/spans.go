package tracing

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

// HTTP returns h inside a server span named "METHOD route" per request,
// continuing the request's traceparent. route names the endpoint, such as
// "/v1/check" or "proxy"; the request's own path is not recorded. A
// request the sampler drops costs the sampler's decision and nothing
// more: h gets the request as it came.
func (t *Tracer) HTTP(route string, h http.Handler) http.Handler {
	return t.http(route, h, false)
}

// Proxy is HTTP for the reverse proxy: the request goes upstream with a
// traceparent naming sluice's span as the parent, so that the upstream's
// span is its child. A request that is not sampled goes with the
// traceparent it came with, if any.
func (t *Tracer) Proxy(h http.Handler) http.Handler {
	return t.http("proxy", h, true)
}

func (t *Tracer) http(route string, h http.Handler, forward bool) http.Handler {
	names := map[string]string{}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		names[m] = m + " " + route
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := names[r.Method]
		if !ok {
			name = "HTTP " + route // a method of the client's own: not a name of its choosing
		}
		ctx := r.Context()
		if _, ok := r.Header["Traceparent"]; ok {
			ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
		} else if !t.sampling.sampleRoot() {
			h.ServeHTTP(w, r)
			return
		}
		ctx, span := t.tracer.Start(ctx, name, t.serverSpan...)
		if !span.IsRecording() {
			h.ServeHTTP(w, r)
			return
		}
		defer span.End()
		span.SetAttributes(attribute.String("http.request.method", methodOf(r.Method, ok)), attribute.String("http.route", route))
		if forward {
			t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
		if rec.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rec.status))
		}
	})
}

// methodOf is the method as recorded: a standard one as sent, any other
// as "_OTHER", as OpenTelemetry's HTTP conventions ask.
func methodOf(method string, known bool) string {
	if known {
		return method
	}
	return "_OTHER"
}

// statusRecorder remembers the status a handler answers with.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote && code >= 200 {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (flushes of
// streamed responses, upgrades).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// shouldRateLimit is the full gRPC method name of Envoy's rate-limit call.
const shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// UnaryInterceptor returns a gRPC interceptor that runs ShouldRateLimit
// inside a server span, continuing the traceparent of the call's
// metadata, and records the domain and the overall decision. Other
// methods (health, reflection) are not traced.
func (t *Tracer) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if info.FullMethod != shouldRateLimit {
			return handler(ctx, req)
		}
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("traceparent")) > 0 {
			ctx = t.prop.Extract(ctx, mdCarrier(md))
		} else if !t.sampling.sampleRoot() {
			return handler(ctx, req)
		}
		service, method, _ := strings.Cut(strings.TrimPrefix(info.FullMethod, "/"), "/")
		ctx, span := t.tracer.Start(ctx, service+"/"+method, t.serverSpan...)
		defer span.End()
		if !span.IsRecording() {
			return handler(ctx, req)
		}
		span.SetAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.service", service), attribute.String("rpc.method", method))
		if r, ok := req.(*pb.RateLimitRequest); ok {
			span.SetAttributes(attribute.String("sluice.domain", r.GetDomain()))
		}
		resp, err := handler(ctx, req)
		st, _ := status.FromError(err)
		span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(st.Code())))
		switch r, _ := resp.(*pb.RateLimitResponse); {
		case err != nil:
			span.SetAttributes(attribute.String("sluice.decision", "undecided"))
			span.SetStatus(codes.Error, st.Code().String())
		case r.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT:
			span.SetAttributes(attribute.String("sluice.decision", "denied"))
		default:
			span.SetAttributes(attribute.String("sluice.decision", "allowed"))
		}
		return resp, err
	}
}

// mdCarrier reads propagation fields from gRPC metadata.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Decided records a decision on span: the zones, the outcome, what
// decided it, and keys (which the caller passes only for zones with
// show_keys). err is the error of a check that could not be decided.
func Decided(span trace.Span, zones, keys []string, d *sluice.Decision, err error) {
	decision := "allowed"
	switch {
	case err != nil:
		decision = "undecided"
		span.SetStatus(codes.Error, errorClass(err))
	case !d.Allowed:
		decision = "denied"
	}
	attrs := []attribute.KeyValue{attribute.StringSlice("sluice.zones", zones), attribute.String("sluice.decision", decision)}
	if err == nil {
		attrs = append(attrs, attribute.String("sluice.source", d.Source.String()))
	}
	if d.Shadowed {
		attrs = append(attrs, attribute.Bool("sluice.shadowed", true))
	}
	if len(keys) > 0 {
		attrs = append(attrs, attribute.StringSlice("sluice.keys", keys))
	}
	span.SetAttributes(attrs...)
}

// Source records on span what decided a check, for callers that know no
// zones (Envoy's rate-limit service).
func Source(span trace.Span, d *sluice.Decision) {
	span.SetAttributes(attribute.String("sluice.source", d.Source.String()))
}

// StoreCall records a store call's latency and the class of its error on
// span.
func StoreCall(span trace.Span, took time.Duration, err error) {
	span.SetAttributes(attribute.Float64("sluice.store.duration", took.Seconds()))
	if err != nil {
		span.SetAttributes(attribute.String("sluice.store.error", errorClass(err)))
	}
}

// errorClass names the kind of an error without its text, which may
// hold addresses or keys.
func errorClass(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, sluice.ErrBadState):
		return "bad-state"
	case errors.Is(err, sluice.ErrInvalid):
		return "invalid"
	case errors.Is(err, httplimit.ErrNoKey):
		return "no-key"
	}
	return "unavailable"
}
