package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/server"
)

var serveCommand = command{
	name:    "serve",
	summary: "run the decision server (HTTP API, nginx auth_request, reverse proxy)",
	run:     runServe,
}

// serveFlags are the settings of "sluice serve" that flags and SLUICE_*
// environment variables may give; a flag wins over its variable, both
// win over the file.
type serveFlags struct {
	configPath  string
	checkConfig bool
	overrides   config.Overrides
}

func (f *serveFlags) register(env Env, fs *flag.FlagSet) {
	fs.StringVar(&f.configPath, "config", env.Getenv("SLUICE_CONFIG"), "YAML configuration `file` (env SLUICE_CONFIG); none: the memory store and a demo zone")
	fs.BoolVar(&f.checkConfig, "check-config", false, "validate the configuration, print the result and exit (0 valid, 1 invalid)")
	fs.StringVar(&f.overrides.Listen, "listen", env.Getenv("SLUICE_LISTEN"), "`host:port` of the API listener (env SLUICE_LISTEN; default 127.0.0.1:8080)")
	fs.StringVar(&f.overrides.Store, "store-url", env.Getenv("SLUICE_STORE_URL"), "store: memory or a redis:// `URL` (env SLUICE_STORE_URL; default memory)")
	fs.StringVar(&f.overrides.LogFormat, "log-format", env.Getenv("SLUICE_LOG_FORMAT"), "log `format`: text or json (env SLUICE_LOG_FORMAT; default text)")
	f.overrides.AdminToken = env.Getenv("SLUICE_ADMIN_TOKEN") // no flag: a flag shows in ps
	f.overrides.TopDigestSecret = env.Getenv("SLUICE_TOP_DIGEST_SECRET")
	fs.StringVar(&f.overrides.LogLevel, "log-level", env.Getenv("SLUICE_LOG_LEVEL"), "log `level`: debug, info, warn, error (env SLUICE_LOG_LEVEL; default info)")
	registerRLSFlags(env, fs, &f.overrides)
}

func runServe(ctx context.Context, env Env, args []string) int {
	var f serveFlags
	fs := newFlagSet(env, "serve", "[flags]")
	f.register(env, fs)
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "sluice serve: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	cfg, err := loadServeConfig(f)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice serve: invalid configuration:\n%v\n", err)
		return 1
	}
	if f.checkConfig {
		if err := checkTracing(env); err != nil {
			fmt.Fprintf(env.Stderr, "sluice serve: invalid configuration:\n%v\n", err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "%s: valid: %s store, %d zone(s), %d listener(s), %d proxy rule(s)\n",
			cmpOr(cfg.File, "default configuration"), cfg.Store.Kind, len(cfg.Zones), len(cfg.Listeners), len(cfg.Proxy.Rules))
		for _, w := range cfg.Warnings() {
			fmt.Fprintf(env.Stdout, "warning: %s\n", w)
		}
		return checkRLSConfig(env, cfg)
	}
	return serve(ctx, env, f, cfg)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// loadServeConfig reads the file (or takes the default) and applies the
// flag and environment overrides.
func loadServeConfig(f serveFlags) (*config.Config, error) {
	cfg := config.Default()
	if f.configPath != "" {
		var err error
		if cfg, err = config.Load(f.configPath); err != nil {
			return nil, err
		}
	}
	if err := cfg.Override(f.overrides); err != nil {
		return nil, fmt.Errorf("flags or SLUICE_* environment: %w", err)
	}
	return cfg, nil
}

func serve(ctx context.Context, env Env, f serveFlags, cfg *config.Config) int {
	level := new(slog.LevelVar)
	level.Set(cfg.Log.Level)
	log := newLogger(env.Stderr, cfg.Log.Format, level)
	log.Info("starting", "config", cmpOr(f.configPath, "default"), "store", string(cfg.Store.Kind), "zones", len(cfg.Zones), "rules", len(cfg.Proxy.Rules))
	tracer, stopTracing, err := startTracing(ctx, env, log)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice serve: %v\n", err)
		return 1
	}
	defer stopTracing()
	srv, err := server.New(ctx, cfg, server.Options{Logger: log, LevelVar: level, ConfigPath: f.configPath, Overrides: &f.overrides, Tracer: tracer})
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice serve: %v\n", err)
		return 1
	}
	if err := srv.Listen(); err != nil {
		fmt.Fprintf(env.Stderr, "sluice serve: %v\n", err)
		return 1
	}
	printBanner(env.Stdout, cfg, srv.Addrs())
	stopHUP := reloadOnSIGHUP(srv)
	defer stopHUP()
	if err := srv.Serve(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(env.Stderr, "sluice serve: %v\n", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, format config.LogFormat, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == config.JSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// reloadOnSIGHUP reloads the configuration on every SIGHUP until the
// returned function is called.
func reloadOnSIGHUP(srv *server.Server) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				srv.Reload()    // logged and counted by the server
				srv.ReloadRLS() // likewise; a no-op without rls.config_dir
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

// printBanner says where the server listens and how to try it: a curl
// line that works as printed against the listener serving /v1/check (the
// first API listener, or the first admin listener when check is an admin
// endpoint there) and the first zone.
func printBanner(w io.Writer, cfg *config.Config, addrs []server.Addr) {
	for _, a := range addrs {
		fmt.Fprintf(w, "sluice: serving %s on %s%s\n", a.Role, scheme(a), a.Addr)
	}
	role := config.API
	adminCheck := cfg.Admin.IsAdmin(config.EndpointCheck)
	if adminCheck && slices.ContainsFunc(addrs, func(a server.Addr) bool { return a.Role == config.AdminRole }) {
		role = config.AdminRole
	}
	for _, a := range addrs {
		if a.Role != role || len(cfg.Zones) == 0 {
			continue
		}
		base := scheme(a) + dialable(a.Addr)
		zone := cfg.Zones[0]
		fmt.Fprintf(w, "\nTry it (zone %q allows %s per key):\n\n", zone.Name, limitsText(zone))
		fmt.Fprintf(w, "  %s\n\n", curlLine(base, zone.Name, adminCheck && cfg.Admin.Token != ""))
		fmt.Fprintf(w, "Run it %d times: the last answer is 429 with Retry-After. Metrics: %s/metrics\n", zone.Limits[0].Rate+1, base)
		return
	}
}

// scheme is the URL scheme of a listener in the banner.
func scheme(a server.Addr) string {
	switch {
	case a.Role == config.GRPC && a.TLS:
		return "grpcs://"
	case a.Role == config.GRPC:
		return "grpc://"
	case a.TLS:
		return "https://"
	}
	return "http://"
}

// curlLine is a shell command that checks the key "alice" in zone, with
// the admin token from the environment when check needs it.
func curlLine(base, zone string, token bool) string {
	auth := ""
	if token {
		auth = ` -H "Authorization: Bearer $SLUICE_ADMIN_TOKEN"`
	}
	return fmt.Sprintf(`curl -i -X POST %s/v1/check -H 'Content-Type: application/json'%s -d '{"zone":"%s","key":"alice"}'`, base, auth, zone)
}

func limitsText(z config.Zone) string {
	parts := make([]string, len(z.Limits))
	for i, l := range z.Limits {
		parts[i] = l.String()
	}
	return strings.Join(parts, ", ")
}

// dialable turns a wildcard listen address into one a client can reach on
// this machine.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
