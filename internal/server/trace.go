package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/tracing"
)

// The hooks of OpenTelemetry tracing (Options.Tracer). Each returns at
// once when tracing is off, so that the request paths pay one nil check.

// traced wraps h in a server span named for route when tracing is on.
func (s *Server) traced(route string, h http.Handler) http.Handler {
	if s.opts.Tracer == nil {
		return h
	}
	return s.opts.Tracer.HTTP(route, h)
}

// tracedProxy wraps the proxy handler in a server span when tracing is
// on; the upstream gets the span as its parent.
func (s *Server) tracedProxy(h http.Handler) http.Handler {
	if s.opts.Tracer == nil {
		return h
	}
	return s.opts.Tracer.Proxy(h)
}

// grpcTraceOptions are the gRPC server options that trace ShouldRateLimit.
func (s *Server) grpcTraceOptions() []grpc.ServerOption {
	if s.opts.Tracer == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(s.opts.Tracer.UnaryInterceptor())}
}

// traceDecision records the outcome of a check of zones, in b, on the
// request's span. Keys are recorded for the zones with show_keys only.
func (s *Server) traceDecision(ctx context.Context, zones []*zone, b *checkBuf, err error) {
	if s.opts.Tracer == nil {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	names := make([]string, len(zones))
	var keys []string
	for i, z := range zones {
		names[i] = z.cfg.Name
		if !z.cfg.ShowKeys {
			continue
		}
		for _, h := range b.c.Hits {
			if h.Zone == z.cfg.Name && !slices.Contains(keys, h.Key) {
				keys = append(keys, h.Key)
			}
		}
	}
	tracing.Decided(span, names, keys, &b.d, err)
}

// traceStore wraps the store's limiter so that every store call records
// its latency and error on the span of the request that made it.
func (s *Server) traceStore(st *Store) *Store {
	if s.opts.Tracer == nil {
		return st
	}
	traced := *st
	traced.Limiter = &tracedStore{next: st.Limiter}
	return &traced
}

// traceRLS wraps a limiter of Envoy's rate-limit service so that the
// span of the call records what decided it.
func (s *Server) traceRLS(l sluice.Limiter) sluice.Limiter {
	if s.opts.Tracer == nil {
		return l
	}
	return &tracedSource{next: l}
}

// tracedStore is a store limiter that records each call on the caller's
// span.
type tracedStore struct{ next sluice.Limiter }

func (t *tracedStore) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return t.next.Check(ctx, c, d)
	}
	start := time.Now()
	err := t.next.Check(ctx, c, d)
	tracing.StoreCall(span, time.Since(start), err)
	return err
}

func (t *tracedStore) Reset(ctx context.Context, c sluice.Check) error { return t.next.Reset(ctx, c) }

// RecordBatch passes an async zone's first-sight records on (see
// timedLimiter.RecordBatch); it runs outside any request.
func (t *tracedStore) RecordBatch(ctx context.Context, checks []sluice.Check, recorded []int64, created []bool) error {
	r, ok := t.next.(edge.BatchRecorder)
	if !ok {
		return fmt.Errorf("server: the store does not record in batches: %w", errors.ErrUnsupported)
	}
	return r.RecordBatch(ctx, checks, recorded, created)
}

// tracedSource records the source of each decision on the caller's span.
type tracedSource struct{ next sluice.Limiter }

func (t *tracedSource) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	err := t.next.Check(ctx, c, d)
	if span := trace.SpanFromContext(ctx); span.IsRecording() && err == nil {
		tracing.Source(span, d)
	}
	return err
}

func (t *tracedSource) Reset(ctx context.Context, c sluice.Check) error { return t.next.Reset(ctx, c) }
