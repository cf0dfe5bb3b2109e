package tracing

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// sampling is the sampler of OTEL_TRACES_SAMPLER and its argument, split
// in two so that a request that starts a trace (no traceparent) and is
// not sampled costs one random number and no span: roots are drawn by
// the Tracer before any span exists (root), and the SDK's sampler
// (sampler) then samples the roots that were drawn and decides the spans
// with a parent as the standard sampler would.
type sampling struct {
	sampler sdktrace.Sampler
	// root is the share of new traces sampled, in [0, 1].
	root float64
}

// samplingFromEnv reads OTEL_TRACES_SAMPLER (default
// parentbased_always_on) and OTEL_TRACES_SAMPLER_ARG (the ratio of the
// traceidratio samplers, default 1).
func samplingFromEnv(getenv func(string) string) (sampling, error) {
	name := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))
	ratio := 1.0
	if strings.HasSuffix(name, "traceidratio") {
		if arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG")); arg != "" {
			r, err := strconv.ParseFloat(arg, 64)
			if err != nil || r < 0 || r > 1 {
				return sampling{}, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
			}
			ratio = r
		}
	}
	switch name {
	case "", "parentbased_always_on":
		return sampling{sdktrace.ParentBased(sdktrace.AlwaysSample()), 1}, nil
	case "parentbased_always_off":
		return sampling{sdktrace.ParentBased(sdktrace.NeverSample()), 0}, nil
	case "parentbased_traceidratio":
		return sampling{sdktrace.ParentBased(sdktrace.AlwaysSample()), ratio}, nil
	case "always_on":
		return sampling{sdktrace.AlwaysSample(), 1}, nil
	case "always_off":
		return sampling{sdktrace.NeverSample(), 0}, nil
	case "traceidratio":
		return sampling{childRatio{sdktrace.TraceIDRatioBased(ratio)}, ratio}, nil
	}
	return sampling{}, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio or their parentbased_ forms", name)
}

// sampleRoot draws whether a new trace is sampled.
func (s sampling) sampleRoot() bool {
	switch s.root {
	case 0:
		return false
	case 1:
		return true
	}
	return rand.Float64() < s.root
}

// childRatio samples the spans with a parent by trace ID ratio, as
// traceidratio does, and every root (drawn before, by sampleRoot).
type childRatio struct{ ratio sdktrace.Sampler }

func (c childRatio) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if trace.SpanContextFromContext(p.ParentContext).IsValid() {
		return c.ratio.ShouldSample(p)
	}
	return sdktrace.AlwaysSample().ShouldSample(p)
}

func (c childRatio) Description() string { return "ChildRatio{" + c.ratio.Description() + "}" }

// CheckSampler reports whether getenv's OTEL_TRACES_SAMPLER and its
// argument are ones New accepts.
func CheckSampler(getenv func(string) string) error {
	_, err := samplingFromEnv(getenv)
	return err
}
