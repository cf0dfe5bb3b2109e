package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/sluicehq/sluice/internal/config"
)

// ErrNoConfigFile is returned by Reload when the server was started
// without a configuration file: there is nothing to reload, and nothing is
// counted.
var ErrNoConfigFile = errors.New("server: reload: no configuration file")

// Reload reads Options.ConfigPath again and, if it is valid, serves it
// from the next request on. An invalid file keeps the running
// configuration: the error says why, is logged and is counted in
// sluice_config_reloads_total{result="failed"}. The store and the
// listeners cannot change without a restart: a new file that changes them
// is applied otherwise, with a warning. Safe for concurrent use.
func (s *Server) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.opts.ConfigPath == "" {
		s.log.Info("reload requested, but the server runs without a configuration file")
		return ErrNoConfigFile
	}
	cfg, err := config.Load(s.opts.ConfigPath)
	if err == nil {
		err = s.apply(cfg)
	}
	if err != nil {
		s.metrics.reloads.WithLabelValues("failed").Inc()
		s.log.Error("configuration reload failed; keeping the running configuration", "file", s.opts.ConfigPath, "err", err)
		return fmt.Errorf("server: reload: %w", err)
	}
	s.metrics.reloads.WithLabelValues("ok").Inc()
	s.log.Info("configuration reloaded", "file", s.opts.ConfigPath, "zones", len(cfg.Zones), "rules", len(cfg.Proxy.Rules))
	return nil
}

// apply compiles cfg and swaps it in, keeping the running store,
// listeners and any setting given by flags or environment.
func (s *Server) apply(cfg *config.Config) error {
	if s.opts.Overrides != nil {
		if err := cfg.Override(*s.opts.Overrides); err != nil {
			return err
		}
	}
	if err := checkAdmin(cfg); err != nil {
		return err
	}
	if !reflect.DeepEqual(cfg.Store, s.running.Store) {
		s.log.Warn("the store section changed; it takes effect on restart", "file", s.opts.ConfigPath)
	}
	if !reflect.DeepEqual(cfg.Listeners, s.running.Listeners) {
		s.log.Warn("the listeners changed; they take effect on restart", "file", s.opts.ConfigPath)
	}
	st, err := s.compile(cfg)
	if err != nil {
		return err
	}
	if s.opts.LevelVar != nil {
		s.opts.LevelVar.Set(cfg.Log.Level)
	}
	s.state.Store(st)
	s.backend.retire(st)
	s.warn(cfg)
	return nil
}

// watch polls path every interval and reloads when its size or
// modification time changes, until ctx ends.
func (s *Server) watch(ctx context.Context, path string, interval time.Duration) {
	last, _ := fileStamp(path)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stamp, err := fileStamp(path)
		if err != nil || stamp == last {
			continue
		}
		last = stamp
		s.Reload() // logged and counted
	}
}

type stamp struct {
	size int64
	mod  time.Time
}

func fileStamp(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	return stamp{fi.Size(), fi.ModTime()}, nil
}
