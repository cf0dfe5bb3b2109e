package config

import (
	"slices"

	"go.yaml.in/yaml/v4"
)

// DefaultGRPCAddr is the address of the grpc listener added when
// rls.config_dir is set and no listener serves grpc: envoyproxy/ratelimit's
// gRPC port.
const DefaultGRPCAddr = "127.0.0.1:8081"

// RLS configures Envoy's rate-limit service (package internal/rls), served
// on grpc listeners and, as POST /json, on api listeners.
type RLS struct {
	// ConfigDir is a directory of envoyproxy/ratelimit YAML rule files
	// (its RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config). Default: none, no
	// rate-limit service.
	ConfigDir string
	// ResponseHeaders adds envoyproxy/ratelimit's RateLimit-Limit,
	// RateLimit-Remaining and RateLimit-Reset fields to every response's
	// response_headers_to_add. Default: false.
	ResponseHeaders bool
	// ShadowMode answers every request's overall code OK, each descriptor
	// decided and counted as usual and keeping its own code, as
	// envoyproxy/ratelimit's SHADOW_MODE. Default: false.
	ShadowMode bool
}

func (w *walker) rls(n *yaml.Node, path string, r *RLS) {
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"config_dir":       func(v *yaml.Node, p string) { r.ConfigDir = w.str(v, p) },
		"response_headers": func(v *yaml.Node, p string) { r.ResponseHeaders = w.boolean(v, p) },
		"shadow_mode":      func(v *yaml.Node, p string) { r.ShadowMode = w.boolean(v, p) },
	})
}

// validateRLS adds the default grpc listener when a rule directory is set
// and no listener serves grpc (unless a listener already has its address:
// then that is the problem), and refuses a grpc listener without one. It
// runs before validateListeners, which fills the listeners' defaults.
func (w *walker) validateRLS(c *Config) {
	grpc := slices.ContainsFunc(c.Listeners, func(l Listener) bool { return l.Serve == GRPC })
	switch {
	case c.RLS.ConfigDir != "" && !grpc:
		if len(c.Listeners) == 0 {
			c.Listeners = []Listener{{Addr: DefaultAddr, Serve: API}}
		}
		if i := slices.IndexFunc(c.Listeners, func(l Listener) bool { return l.Addr == DefaultGRPCAddr }); i >= 0 {
			// Named here: the added listener is in no file, so "also the
			// address of" it would name a listeners[n] the user never wrote.
			p := index("listeners", i) + ".addr"
			w.add(w.line(p), p, "%q is also the address of the grpc listener that rls.config_dir adds by default; "+
				"move this listener, or add a listener with serve: grpc on another address (or set --grpc-listen)", DefaultGRPCAddr)
			return
		}
		c.Listeners = append(c.Listeners, Listener{Addr: DefaultGRPCAddr, Serve: GRPC})
	case c.RLS.ConfigDir == "" && grpc:
		w.add(w.line("listeners"), "rls.config_dir", "a listener serves grpc but rls.config_dir is not set")
	}
}

// overrideRLS applies the rate-limit service's flags and environment.
func (c *Config) overrideRLS(o Overrides) {
	if o.RLSConfigDir != "" {
		c.RLS.ConfigDir = o.RLSConfigDir
	}
	if o.GRPCListen == "" {
		return
	}
	for i := range c.Listeners {
		if c.Listeners[i].Serve == GRPC {
			c.Listeners[i].Addr = o.GRPCListen
			return
		}
	}
	c.Listeners = append(c.Listeners, Listener{Addr: o.GRPCListen, Serve: GRPC})
}
