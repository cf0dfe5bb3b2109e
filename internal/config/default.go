package config

import (
	"time"

	"github.com/sluicehq/sluice"
)

// DemoZone is the name of the zone Default configures.
const DemoZone = "demo"

// Default returns the configuration of "sluice serve" without a file: the
// memory store, one API listener on 127.0.0.1:8080, and the zone "demo"
// allowing 10 requests per minute per key (sliding window), keyed by the
// client address when used from the proxy or auth_request.
func Default() *Config {
	c := &Config{
		Zones: []Zone{{
			Name:   DemoZone,
			Limits: []sluice.Limit{{Rate: 10, Window: time.Minute, Algorithm: sluice.SlidingWindow}},
		}},
	}
	w := newWalker("")
	w.validate(c)
	if err := w.err(); err != nil {
		panic("config: the default configuration is invalid: " + err.Error())
	}
	return c
}

// Overrides are the settings flags and environment variables may change
// on top of a file. Empty fields change nothing.
type Overrides struct {
	// Listen replaces the address of the first API listener.
	Listen string
	// Store replaces the store: "memory" or a redis:// URL.
	Store string
	// LogFormat replaces log.format.
	LogFormat string
	// LogLevel replaces log.level.
	LogLevel string
	// AdminToken replaces the token read from admin.token_file
	// (SLUICE_ADMIN_TOKEN).
	AdminToken string
	// TopDigestSecret replaces the secret read from
	// top.digest_secret_file (SLUICE_TOP_DIGEST_SECRET).
	TopDigestSecret string
	// RLSConfigDir replaces rls.config_dir.
	RLSConfigDir string
	// GRPCListen replaces the address of the first grpc listener.
	GRPCListen string
}

// Override applies o to c and validates the result. Problems name the
// config path they change, such as "store.url".
func (c *Config) Override(o Overrides) error {
	w := newWalker("")
	if o.Listen != "" {
		c.listen(o.Listen)
	}
	if o.Store != "" {
		// The URL replaces the store: the fields of another kind go too.
		c.Store.URL, c.Store.SentinelMaster, c.Store.SentinelAddrs, c.Store.ClusterSeeds = o.Store, "", nil, nil
		c.Store.Password, c.Store.MaxKeys = "", 0
	}
	if o.LogFormat != "" {
		c.Log.Format = LogFormat(o.LogFormat)
	}
	if o.LogLevel != "" {
		level, err := ParseLevel(o.LogLevel)
		if err != nil {
			w.add(0, "log.level", "%v", err)
		}
		c.Log.Level = level
	}
	if o.AdminToken != "" {
		if err := CheckToken(o.AdminToken); err != nil {
			w.add(0, "admin.token", "SLUICE_ADMIN_TOKEN: %v", err)
		}
		c.Admin.Token = o.AdminToken
	}
	if o.TopDigestSecret != "" {
		if err := CheckToken(o.TopDigestSecret); err != nil {
			w.add(0, "top.digest_secret", "SLUICE_TOP_DIGEST_SECRET: %v", err)
		}
		c.Top.DigestSecret = o.TopDigestSecret
	}
	c.overrideRLS(o)
	w.validateStore(&c.Store)
	w.validateLog(&c.Log)
	w.validateRLS(c)
	w.validateListeners(c)
	return w.err()
}

func (c *Config) listen(addr string) {
	for i := range c.Listeners {
		if c.Listeners[i].Serve == API {
			c.Listeners[i].Addr = addr
			return
		}
	}
	c.Listeners = append(c.Listeners, Listener{Addr: addr, Serve: API})
}
