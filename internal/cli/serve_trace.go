package cli

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/sluicehq/sluice/internal/tracing"
)

// traceShutdownTimeout bounds how long "sluice serve" waits, on the way
// out, for the collector to take the last spans.
const traceShutdownTimeout = 5 * time.Second

// startTracing returns the Tracer the environment asks for (see
// tracing.Enabled), or nil, and the function that flushes it at exit.
func startTracing(ctx context.Context, env Env, log *slog.Logger) (*tracing.Tracer, func(), error) {
	on, err := tracing.Enabled(env.Getenv)
	if err != nil || !on {
		return nil, func() {}, err
	}
	version := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	t, err := tracing.New(ctx, version, env.Getenv)
	if err != nil {
		return nil, nil, err
	}
	log.Info("tracing on: exporting spans over OTLP gRPC")
	return t, func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceShutdownTimeout)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not sent at exit", "err", err.Error())
		}
	}, nil
}

// checkTracing validates the tracing environment for --check-config.
func checkTracing(env Env) error {
	on, err := tracing.Enabled(env.Getenv)
	if err == nil && on {
		err = tracing.CheckSampler(env.Getenv)
	}
	if err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	return nil
}
