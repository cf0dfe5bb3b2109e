package cli

import (
	"flag"
	"fmt"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/rls"
)

// registerRLSFlags adds the flags of Envoy's rate-limit service to
// "sluice serve".
func registerRLSFlags(env Env, fs *flag.FlagSet, o *config.Overrides) {
	fs.StringVar(&o.RLSConfigDir, "rls-config-dir", env.Getenv("SLUICE_RLS_CONFIG_DIR"),
		"`directory` of envoyproxy/ratelimit rule files (its RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config); serves Envoy's ShouldRateLimit on a grpc listener (env SLUICE_RLS_CONFIG_DIR)")
	fs.StringVar(&o.GRPCListen, "grpc-listen", env.Getenv("SLUICE_GRPC_LISTEN"),
		"`host:port` of the grpc listener (env SLUICE_GRPC_LISTEN; default "+config.DefaultGRPCAddr+" when a rule directory is set)")
}

// checkRLSConfig validates the rule directory for --check-config and
// returns the exit code.
func checkRLSConfig(env Env, cfg *config.Config) int {
	if cfg.RLS.ConfigDir == "" {
		return 0
	}
	rules, err := rls.LoadDir(cfg.RLS.ConfigDir)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice serve: invalid rate-limit rules:\n%v\n", err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "%s: valid: %d rate-limit domain(s)\n", cfg.RLS.ConfigDir, rules.Domains())
	return 0
}
