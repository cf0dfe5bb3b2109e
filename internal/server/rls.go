package server

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/rls"
)

// Envoy's rate-limit service: the wiring of package rls into the server.
// The rules come from rls.config_dir, a directory of envoyproxy/ratelimit
// files; they are checked through the same failure-policy chains as the
// zones, and reloaded (on change and on SIGHUP) as the configuration file
// is: a bad directory keeps the running rules and says why.

// openRLS loads the rule directory of cfg, if any, and builds the service.
func (s *Server) openRLS(cfg *config.Config) error {
	if cfg.RLS.ConfigDir == "" {
		return nil
	}
	rules, err := rls.LoadDir(cfg.RLS.ConfigDir)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	svc, err := rls.New(rules, rls.Options{
		Limiter:         s.rlsLimiters(),
		BadState:        s.backend.settle,
		Logger:          s.log,
		Registerer:      s.metrics.reg,
		ResponseHeaders: cfg.RLS.ResponseHeaders,
		Shadow:          cfg.RLS.ShadowMode,
	})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.rls = svc
	s.log.Info("rate-limit service rules loaded", "dir", cfg.RLS.ConfigDir, "domains", rules.Domains())
	return nil
}

// grpcServer is the server of a grpc listener, over TLS with certs when
// not nil. The TLS handshake must end within the listener's
// read_header_timeout.
func (s *Server) grpcServer(cfg config.Listener, certs *certReloader) serving {
	opts := s.grpcTraceOptions()
	if certs != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(certs.config())), grpc.ConnectionTimeout(cfg.ReadHeaderTimeout))
	}
	g := s.rls.NewGRPCServer(int(min(cfg.MaxBodyBytes, 1<<30)), opts...)
	// NOT_SERVING until the store is warm (ready.go).
	g.SetServing(false)
	s.ready.onReady(func() { g.SetServing(true) })
	return g
}

// ReloadRLS reads the rule directory again and, if every file is valid,
// serves it from the next request on. An invalid directory keeps the
// running rules: the error names the file, the line and the reason, is
// logged and is counted in sluice_config_reloads_total{result="failed"}.
// It does nothing without rls.config_dir. Safe for concurrent use.
func (s *Server) ReloadRLS() error {
	if s.rls == nil {
		return nil
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	dir := s.running.RLS.ConfigDir
	rules, err := rls.LoadDir(dir)
	if err != nil {
		s.metrics.reloads.WithLabelValues("failed").Inc()
		s.log.Error("rate-limit rules reload failed; keeping the running rules", "dir", dir, "err", err)
		return fmt.Errorf("server: reload: %w", err)
	}
	s.rls.SetRules(rules)
	s.metrics.reloads.WithLabelValues("ok").Inc()
	s.log.Info("rate-limit rules reloaded", "dir", dir, "domains", rules.Domains())
	return nil
}

// watchRLS starts polling the rule directory, as the configuration file
// is polled, until ctx ends.
func (s *Server) watchRLS(ctx context.Context) {
	if s.rls == nil || s.opts.WatchInterval <= 0 {
		return
	}
	go func() {
		dir := s.running.RLS.ConfigDir
		// The stamp of the rules being served, not of the directory now:
		// a change since they were read is a change.
		last := s.rls.Rules().Stamp()
		t := time.NewTicker(s.opts.WatchInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st, err := rls.DirStamp(dir)
			if err != nil || st == last {
				continue
			}
			last = st
			s.ReloadRLS() // logged and counted
		}
	}()
}
