package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Enabled reports whether getenv asks for traces: OTEL_TRACES_EXPORTER is
// "otlp", or OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and OTEL_TRACES_EXPORTER is
// not "none"). OTEL_SDK_DISABLED=true turns tracing off. It is an error to
// ask for another exporter, or for OTLP over a protocol other than gRPC.
func Enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	switch exporter {
	case "none":
		return false, nil
	case "", "otlp":
	default:
		return false, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: sluice exports traces over otlp only", exporter)
	}
	on := exporter == "otlp" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if !on {
		return false, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(v); p != "" {
			if p != "grpc" {
				return false, fmt.Errorf("tracing: %s=%q: sluice exports OTLP over grpc only", v, p)
			}
			break
		}
	}
	return true, nil
}

// Tracer starts the spans of sluice serve and exports them. Its methods
// are safe for concurrent use. A nil *Tracer means tracing is off; the
// server checks for nil before calling it.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	// serverSpan are the options of every span: made once, as an
	// option's interface value and the slice of them cost an allocation
	// each per request.
	serverSpan []trace.SpanStartOption
	sampling   sampling
}

// New returns a Tracer exporting over OTLP gRPC. The exporter, the
// sampler, the batch processor and the resource read the standard OTEL_*
// environment variables themselves (endpoint, headers, TLS certificates,
// compression, timeout; OTEL_SERVICE_NAME, default "sluice";
// OTEL_RESOURCE_ATTRIBUTES; OTEL_BSP_*). The sampler is read from getenv:
// OTEL_TRACES_SAMPLER (always_on, always_off, traceidratio and their
// parentbased_ forms; default parentbased_always_on) and
// OTEL_TRACES_SAMPLER_ARG. version is the service.version. New does not
// wait for the collector: spans are sent in the background and dropped
// while it cannot be reached.
func New(ctx context.Context, version string, getenv func(string) string) (*Tracer, error) {
	smp, err := samplingFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(attribute.String("service.name", "sluice"), attribute.String("service.version", version)),
		resource.Environment(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(smp.sampler))
	return &Tracer{
		provider:   tp,
		tracer:     tp.Tracer("github.com/sluicehq/sluice/internal/tracing"),
		prop:       propagation.TraceContext{},
		sampling:   smp,
		serverSpan: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
	}, nil
}

// Shutdown sends the spans still buffered and stops the exporter, waiting
// at most until ctx ends.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// ForceFlush sends the spans buffered so far, waiting at most until ctx
// ends.
func (t *Tracer) ForceFlush(ctx context.Context) error {
	if err := t.provider.ForceFlush(ctx); err != nil {
		return fmt.Errorf("tracing: flush: %w", err)
	}
	return nil
}
