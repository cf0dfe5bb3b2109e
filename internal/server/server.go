package server

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/rls"
	"github.com/sluicehq/sluice/internal/top"
	"github.com/sluicehq/sluice/internal/tracing"
)

// Defaults of Options.
const (
	DefaultWatchInterval   = 2 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
)

// Options configure a Server. The zero value means defaults.
type Options struct {
	// Logger receives the server's structured logs. Default: discard.
	Logger *slog.Logger
	// LevelVar, when set, is the level of Logger's handler: a reload sets
	// it to the new file's log.level. Default nil: the level is fixed.
	LevelVar *slog.LevelVar
	// ConfigPath is the file Reload reads and the watcher polls. Default
	// empty: no reload, no watching.
	ConfigPath string
	// WatchInterval is how often ConfigPath's size and modification time
	// are polled; a change triggers a reload. Negative disables polling
	// (SIGHUP and Reload still work). Default 2s.
	WatchInterval time.Duration
	// ShutdownTimeout bounds how long Serve waits for in-flight requests
	// after its context ends; past it, connections are closed. Default 30s.
	ShutdownTimeout time.Duration
	// Overrides are the flag and environment settings applied on top of
	// every reloaded file, as they were on the first. Default nil.
	Overrides *config.Overrides
	// Tracer, when set, traces the decisions (trace.go). Default nil:
	// tracing off.
	Tracer *tracing.Tracer
	// Store is the store to check with. Default: OpenStore of the
	// configuration's store section. The server closes it on shutdown.
	Store *Store
}

// Server is the sluice decision service: the HTTP API, the nginx
// auth_request endpoint, the reverse proxy and the operational endpoints,
// on the listeners of its configuration. Create one with New, then call
// Listen (optional: to learn the bound addresses) and Serve.
type Server struct {
	opts      Options
	log       *slog.Logger
	metrics   *metrics
	backend   *backend
	transport *http.Transport
	state     atomic.Pointer[state]
	bufs      sync.Pool

	reloadMu sync.Mutex
	// running is the configuration whose store and listeners are in use;
	// a reload cannot change them.
	running *config.Config

	listeners []*listener
	// upstreamLogs and adminLogs bound the upstream error lines and the
	// refused admin calls to one line per edge.DefaultLogInterval each.
	upstreamLogs, adminLogs throttle
	// adminListener is whether some listener has the admin role: then the
	// admin endpoints are served there only.
	adminListener bool

	// rls is Envoy's rate-limit service; nil without rls.config_dir.
	rls *rls.Service
	// top tracks the keys each zone limits most (top.go); nil when
	// disabled.
	top *top.Set

	// tlsLogs bounds the failed TLS handshakes logged (httpErrorLog).
	tlsLogs throttle
	// ready is whether the store is warm (ready.go); stopWarm ends the
	// warm-up at shutdown; storeLogs bounds its log lines.
	ready     *readiness
	stopWarm  context.CancelFunc
	storeLogs throttle
}

type listener struct {
	cfg config.Listener
	ln  net.Listener
	srv serving
}

// serving is what Serve and shutdown need of a listener's server: an
// *http.Server or a gRPC server.
type serving interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

// New returns a Server for cfg. It opens the store (unless opts.Store is
// set) but does not listen yet, and starts warming the store up: the
// server is ready (/readyz, gRPC health) once it has connected and loaded
// its scripts (ready.go). A Redis that does not answer now is dialed
// again in the background until it does; meanwhile the server is not
// ready and its failure policies decide. ctx is only checked before
// anything is opened.
func New(ctx context.Context, cfg *config.Config, opts Options) (*Server, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.WatchInterval == 0 {
		opts.WatchInterval = DefaultWatchInterval
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if err := checkAdmin(cfg); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, metrics: newMetrics(), running: cfg, transport: newTransport()}
	s.upstreamLogs.every, s.adminLogs.every, s.storeLogs.every = edge.DefaultLogInterval, edge.DefaultLogInterval, edge.DefaultLogInterval
	s.tlsLogs.every = edge.DefaultLogInterval
	s.adminListener = slices.ContainsFunc(cfg.Listeners, func(l config.Listener) bool { return l.Serve == config.AdminRole })
	s.warn(cfg)
	store := opts.Store
	if store == nil {
		var err error
		store, err = OpenStore(cfg.Store, s.log)
		if errors.Is(err, sluice.ErrUnavailable) {
			s.log.Warn("store unreachable at start; not ready until it answers", "kind", string(cfg.Store.Kind), "error", err.Error())
			store, err = openLateStore(cfg.Store, s.log), nil
		}
		if err != nil {
			return nil, err
		}
	}
	s.ready = newReadiness()
	b, err := newBackend(s.traceStore(store), cfg.Store, s.metrics, s.log, s.ready)
	if err != nil {
		return nil, err
	}
	s.backend = b
	s.metrics.reg.MustRegister(edgeCollector{b})
	if store.Metrics != nil {
		if err := s.metrics.reg.Register(store.Metrics); err != nil {
			return nil, fmt.Errorf("server: store metrics: %w", err)
		}
	}
	if s.top, err = openTop(cfg); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	st, err := s.compile(cfg)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.state.Store(st)
	if err := s.openRLS(cfg); err != nil {
		return nil, err
	}
	warmCtx, cancel := context.WithCancel(context.Background())
	s.stopWarm = cancel
	if !s.backend.remote || s.warmOnce(warmCtx, time.Now(), 1) == nil {
		s.ready.set() // a memory store, or a Redis warmed up at the first attempt
	} else {
		go s.warm(warmCtx)
	}
	return s, nil
}

// Config returns the configuration being served.
func (s *Server) Config() *config.Config { return s.state.Load().cfg }

// Listen binds every listener of the configuration. Serve calls it if it
// was not called.
func (s *Server) Listen() error {
	if s.listeners != nil {
		return nil
	}
	var lc net.ListenConfig
	for _, cfg := range s.running.Listeners {
		srv, err := s.serverFor(cfg)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("server: listener (%s) on %s: tls: %w", cfg.Serve, cfg.Addr, err)
		}
		ln, err := lc.Listen(context.Background(), "tcp", cfg.Addr)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("server: listen (%s) on %s: %w", cfg.Serve, cfg.Addr, err)
		}
		s.listeners = append(s.listeners, &listener{cfg: cfg, ln: ln, srv: srv})
	}
	return nil
}

// serverFor returns the server of a listener: gRPC or HTTP, over TLS when
// the listener has a tls section.
func (s *Server) serverFor(cfg config.Listener) (serving, error) {
	var certs *certReloader
	if cfg.TLS != nil {
		protos := []string{"h2", "http/1.1"}
		if cfg.Serve == config.GRPC {
			protos = []string{"h2"}
		}
		var err error
		if certs, err = newCertReloader(*cfg.TLS, protos, s.log); err != nil {
			return nil, err
		}
	}
	if cfg.Serve == config.GRPC {
		return s.grpcServer(cfg, certs), nil
	}
	h := s.httpServer(cfg)
	if certs == nil {
		return h, nil
	}
	h.TLSConfig = certs.config()
	return httpsServer{h}, nil
}

func (s *Server) closeListeners() {
	for _, l := range s.listeners {
		l.ln.Close()
	}
	s.listeners = nil
}

// Addrs returns the bound address of each listener, in configuration
// order, with its role. Empty before Listen.
func (s *Server) Addrs() []Addr {
	out := make([]Addr, len(s.listeners))
	for i, l := range s.listeners {
		out[i] = Addr{Role: l.cfg.Serve, Addr: l.ln.Addr().String(), TLS: l.cfg.TLS != nil}
	}
	return out
}

// Addr is a bound listener.
type Addr struct {
	Role config.Role
	// Addr is host:port, with the port chosen by the system when the
	// configuration asked for port 0.
	Addr string
	// TLS is whether the listener serves TLS.
	TLS bool
}

func (s *Server) httpServer(cfg config.Listener) *http.Server {
	var h http.Handler
	if cfg.Serve == config.ProxyRole {
		h = s.tracedProxy(s.proxyHandler())
	} else {
		h = s.apiHandler(cfg.Serve)
	}
	return &http.Server{
		Handler:           limitBody(h, cfg.MaxBodyBytes),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(httpErrorLog{s}, "", 0),
	}
}

// limitBody caps request bodies at n bytes: reading past it fails with
// *http.MaxBytesError, which handlers answer with 413.
func limitBody(h http.Handler, n int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, n)
		h.ServeHTTP(w, r)
	})
}

// Serve serves every listener until ctx ends, then shuts down gracefully:
// it stops accepting, waits up to Options.ShutdownTimeout for in-flight
// requests, and closes the store. It also watches the configuration file
// for changes when Options.ConfigPath is set. It returns nil after a clean
// shutdown, or the first listener's error.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	errc := make(chan error, len(s.listeners))
	for _, l := range s.listeners {
		go func() { errc <- l.srv.Serve(l.ln) }()
		s.log.Info("listening", "addr", l.ln.Addr().String(), "serve", string(l.cfg.Serve))
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if s.opts.ConfigPath != "" && s.opts.WatchInterval > 0 {
		go s.watch(watchCtx, s.opts.ConfigPath, s.opts.WatchInterval)
	}
	s.watchRLS(watchCtx)
	s.runTop(watchCtx)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("server: %w", err)
	}
	stopWatch()
	return errors.Join(err, s.shutdown())
}

// shutdown stops every listener, draining in-flight requests within the
// shutdown timeout, then closes the store.
func (s *Server) shutdown() error {
	s.log.Info("shutting down", "timeout", s.opts.ShutdownTimeout.String())
	s.stopWarm()
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range s.listeners {
		wg.Go(func() {
			if err := l.srv.Shutdown(ctx); err != nil {
				s.log.Warn("shutdown timed out; closing connections", "addr", l.ln.Addr().String(), "err", err)
				l.srv.Close()
			}
		})
	}
	wg.Wait()
	s.transport.CloseIdleConnections()
	if err := s.backend.close(); err != nil {
		return fmt.Errorf("server: close store: %w", err)
	}
	s.log.Info("stopped")
	return nil
}

// checkAdmin refuses a configuration whose admin token file was named but
// not read (config.Parse does no I/O; config.Load reads it): serving it
// would leave the admin endpoints open.
func checkAdmin(cfg *config.Config) error {
	if cfg.Admin.TokenFile != "" && cfg.Admin.Token == "" {
		return fmt.Errorf("server: admin.token_file %q was not read; load the configuration with config.Load", cfg.Admin.TokenFile)
	}
	return nil
}

// warn logs what cfg leaves open (config.Config.Warnings), such as an
// unprotected /v1/reset.
func (s *Server) warn(cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		s.log.Warn(w)
	}
}
