package config

import (
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
)

// Config is a validated sluice server configuration. Build one with Parse,
// Load or Default; the zero value is not valid.
type Config struct {
	// File is the name the configuration was read from, used in messages.
	// Empty for Default.
	File string
	// Store says where counters live.
	Store Store
	// Log configures the server's structured logs.
	Log Log
	// Listeners are the addresses the server listens on, at least one.
	Listeners []Listener
	// TrustedProxies are the peers whose X-Forwarded-For and X-Real-IP
	// headers are believed when a key is the client address. Zones may
	// override it. Default: none, so the client address is the TCP peer.
	TrustedProxies []netip.Prefix
	// Zones are the named limits, at least one, with unique names.
	Zones []Zone
	// Proxy configures the reverse proxy served on proxy listeners.
	Proxy Proxy
	// Admin says which endpoints are admin endpoints and how they are
	// protected.
	Admin Admin
	// RLS configures Envoy's rate-limit service on grpc listeners.
	RLS RLS
	// Top configures the tracking of the keys each zone limits most.
	Top Top
}

// Zone returns the zone named name, or nil.
func (c *Config) Zone(name string) *Zone {
	for i := range c.Zones {
		if c.Zones[i].Name == name {
			return &c.Zones[i]
		}
	}
	return nil
}

// StoreKind is the kind of store a Store section selects.
type StoreKind string

// The store kinds.
const (
	// Memory keeps counters in process memory: exact for one process, lost
	// on restart. The default.
	Memory StoreKind = "memory"
	// Redis is a standalone Redis server (redis:// or rediss:// URL).
	Redis StoreKind = "redis"
	// Sentinel is a Redis master found through Redis Sentinel.
	Sentinel StoreKind = "sentinel"
	// Cluster is a Redis Cluster reached through seed addresses.
	Cluster StoreKind = "cluster"
)

// Store says where counters live.
type Store struct {
	// Kind is derived from the other fields: Memory unless URL, Sentinel or
	// ClusterSeeds is set.
	Kind StoreKind
	// URL is "memory" or a Redis URL: redis://[user:password@]host:port[/db]
	// or rediss:// for a standalone server,
	// redis-sentinel://host:port,host:port/master[/db] for Sentinel,
	// redis-cluster://host:port,host:port for Cluster seeds (the rediss-
	// forms use TLS). Default: "memory".
	URL string
	// SentinelMaster and SentinelAddrs find the master through Sentinel.
	// Both or neither. Default: unset.
	SentinelMaster string
	SentinelAddrs  []string
	// ClusterSeeds are host:port addresses of Redis Cluster nodes. Default:
	// unset.
	ClusterSeeds []string
	// Password authenticates to Redis (Sentinel and Cluster; a URL carries
	// its own). Default: none.
	Password string
	// Prefix is prepended to every Redis key. Default: "sluice:".
	Prefix string
	// Timeout bounds every store call. Default: DefaultStoreTimeout (50ms).
	Timeout time.Duration
	// MaxKeys bounds the keys a memory store tracks. Default: 0, the memory
	// store's own default.
	MaxKeys int
}

// Defaults of the Store section.
const (
	DefaultStorePrefix = "sluice:"
	// DefaultStoreTimeout is sluice.DefaultTimeout: one default bound on a
	// store call for the library and the server.
	DefaultStoreTimeout = sluice.DefaultTimeout
)

// LogFormat is the encoding of log records.
type LogFormat string

// The log formats.
const (
	Text LogFormat = "text"
	JSON LogFormat = "json"
)

// Log configures structured logging.
type Log struct {
	// Format is "text" or "json". Default: "text".
	Format LogFormat
	// Level is the lowest level logged: debug, info, warn or error.
	// Default: info.
	Level slog.Level
}

// Role is what a listener serves.
type Role string

// The listener roles.
const (
	// API serves the decision API (/v1/check, /v1/reset, /v1/auth) and the
	// operational endpoints (/metrics, /healthz, /readyz).
	API Role = "api"
	// ProxyRole serves the reverse proxy: every request is matched against
	// the proxy rules.
	ProxyRole Role = "proxy"
	// AdminRole serves the admin endpoints (Admin.Endpoints) and the
	// operational endpoints. When some listener has this role, the admin
	// endpoints are served only there.
	AdminRole Role = "admin"
	// GRPC serves Envoy's rate-limit service (ShouldRateLimit), gRPC
	// health and reflection. Needs RLS.ConfigDir.
	GRPC Role = "grpc"
)

// Endpoint names an API endpoint that can be made an admin endpoint.
type Endpoint string

// The endpoints Admin.Endpoints may list.
const (
	// EndpointReset is POST /v1/reset.
	EndpointReset Endpoint = "reset"
	// EndpointCheck is POST /v1/check.
	EndpointCheck Endpoint = "check"
	// EndpointMetrics is GET /metrics, whose labels name every zone.
	EndpointMetrics Endpoint = "metrics"
)

// Admin protects the endpoints that change or reveal counters.
type Admin struct {
	// Endpoints are the admin endpoints: served only on admin listeners
	// when there is one (other listeners answer them 404), and requiring
	// Token when it is set. Default: [reset].
	Endpoints []Endpoint
	// TokenFile names a file whose content (without a final newline) is
	// the bearer token; Load reads it. Relative names are relative to the
	// configuration file's directory. Default: none.
	TokenFile string
	// Token, when set, is required on admin endpoints as
	// "Authorization: Bearer TOKEN". It is read from TokenFile by Load, or
	// given by Overrides.AdminToken (SLUICE_ADMIN_TOKEN), which wins.
	// Default: none, no token is required.
	Token string
	// Open serves the endpoints that change counters (POST /v1/reset and
	// POST /v1/top/reset) to every client of the api listeners when
	// neither an admin listener nor a token protects them. Without it,
	// such an unprotected endpoint answers 403 and says how to enable
	// it. YAML: open: true. Default: false.
	Open bool
}

// adminProtected reports whether the admin endpoints are protected: by
// an admin listener, where they are served only, or by a token.
func (c *Config) adminProtected() bool {
	return c.has(AdminRole) || c.Admin.Token != ""
}

func (c *Config) has(r Role) bool {
	return slices.ContainsFunc(c.Listeners, func(l Listener) bool { return l.Serve == r })
}

// ServesReset reports whether POST /v1/reset is served: when it is an
// admin endpoint that an admin listener or a token protects, or with
// Admin.Open. Otherwise it answers 403.
func (c *Config) ServesReset() bool {
	return c.Admin.Open || c.Admin.IsAdmin(EndpointReset) && c.adminProtected()
}

// ServesTopReset reports whether POST /v1/top/reset is served: when an
// admin listener or a token protects it (it is always an admin
// endpoint), or with Admin.Open. Otherwise it answers 403.
func (c *Config) ServesTopReset() bool {
	return c.Admin.Open || c.adminProtected()
}

// ResetRefusal is the reason given with the 403 of a counter-changing
// endpoint (path) that is not served, and how to enable it.
func ResetRefusal(path string) string {
	return "POST " + path + " changes counters and nothing protects it, so it is off: " +
		"enable it with an admin token (admin.token_file or SLUICE_ADMIN_TOKEN) or a serve: admin listener, " +
		"with reset in admin.endpoints, or serve it to every client of the api listeners with admin.open: true"
}

// IsAdmin reports whether e is an admin endpoint.
func (a *Admin) IsAdmin(e Endpoint) bool {
	for _, x := range a.Endpoints {
		if x == e {
			return true
		}
	}
	return false
}

// Listener is one address the server listens on.
type Listener struct {
	// Addr is host:port. Default for the first API listener:
	// 127.0.0.1:8080.
	Addr string
	// Serve is the listener's role. Default: api.
	Serve Role
	// ReadHeaderTimeout bounds reading a request's headers. Default: 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request. Default: 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response, from the end of the request
	// headers. Default: 30s for api, 120s for proxy.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for the
	// next request. Default: 120s.
	IdleTimeout time.Duration
	// MaxBodyBytes bounds request bodies; larger ones get 413. Default:
	// 1 MiB for api, 10 MiB for proxy.
	MaxBodyBytes int64
	// TLS, when set, makes the listener serve TLS (HTTPS, or gRPC over
	// TLS), with client certificates when it names client CAs. Default:
	// nil, plain TCP.
	TLS *TLS
}

// Listener defaults.
const (
	DefaultAddr              = "127.0.0.1:8080"
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultAPIWriteTimeout   = 30 * time.Second
	DefaultProxyWriteTimeout = 120 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultAPIMaxBodyBytes   = 1 << 20
	DefaultProxyMaxBodyBytes = 10 << 20
)

// FailurePolicy says what a zone decides when the store cannot be reached.
type FailurePolicy string

// The failure policies.
const (
	// FailOpen allows the check. The default.
	FailOpen FailurePolicy = "open"
	// FailClosed denies the check.
	FailClosed FailurePolicy = "closed"
	// FailLocal decides with an in-process memory limiter.
	FailLocal FailurePolicy = "local"
)

// Zone is a named set of limits applied to one key per request.
type Zone struct {
	// Name identifies the zone in the API, headers, metrics and keys.
	Name string
	// Limits are the zone's limits, at least one, at most sluice.MaxHits,
	// with their Algorithm, Resolution and Shadow resolved.
	Limits []sluice.Limit
	// Key says where the key of a proxied or auth_request request comes
	// from. Default: the client address.
	Key KeySource
	// Group, when set, is the check's shared group (sluice.Check.Group).
	// Default: none.
	Group string
	// Failure is the zone's failure policy. Default: open.
	Failure FailurePolicy
	// Shadow makes every limit of the zone a shadow limit. Default: false.
	Shadow bool
	// Mode says how the zone's checks reach the store: SyncMode (each
	// check asks it) or AsyncMode (decided locally from a view of the
	// shared usage, pending cost sent every SyncInterval; see package
	// edge). Default: sync.
	Mode Mode
	// SyncInterval is how often an async zone sends its pending cost.
	// Only with mode async. Default: edge.DefaultSyncInterval (100ms).
	SyncInterval time.Duration
	// Processes is, for an async zone, the number of servers sharing the
	// store: each admits locally at most its share of what remains, which
	// divides the worst-case over-admission by about as much
	// (edge.AsyncOptions.Processes). Only with mode async. Default: 1.
	Processes int
	// FirstSight is read so that older configurations load, and has no
	// effect: a key's first check of an async zone asks the store
	// (edge.AsyncOptions.FirstSight is deprecated). A value other than 0
	// is named in Warnings.
	FirstSight int64
	// ShowKeys shows the zone's keys as they are in GET /v1/top, /ui and
	// "sluice top"; otherwise they are shown by their internal/keyname
	// digest (a key is often a credential). Default: false.
	ShowKeys bool
}

// Mode says how a zone's checks reach the store.
type Mode string

// The modes.
const (
	// SyncMode asks the store on every check. The default.
	SyncMode Mode = "sync"
	// AsyncMode decides locally and sends the cost in the background.
	AsyncMode Mode = "async"
)

// DefaultSyncInterval is the default Zone.SyncInterval, edge's default.
const DefaultSyncInterval = 100 * time.Millisecond

// KeyPartKind is where one part of a key comes from.
type KeyPartKind string

// The key part kinds.
const (
	// ClientAddress is the client's IP address: the TCP peer, or the
	// address a trusted proxy reports.
	ClientAddress KeyPartKind = "client-address"
	// Header is a request header's value.
	Header KeyPartKind = "header"
	// Query is a query argument's value, such as ?token=.
	Query KeyPartKind = "query"
	// Cookie is a cookie's value.
	Cookie KeyPartKind = "cookie"
)

// KeyPart is one source of a key.
type KeyPart struct {
	Kind KeyPartKind
	// Name is the header, query argument or cookie name; empty for
	// ClientAddress.
	Name string
}

// String returns the part in its config form, such as "header:X-API-Key".
func (p KeyPart) String() string {
	if p.Name == "" {
		return string(p.Kind)
	}
	return string(p.Kind) + ":" + p.Name
}

// KeySource is how a request's key is built: every part, in order,
// combined (or, with FirstOf, the first part the request carries).
type KeySource struct {
	// Parts are the sources of the key. Default: [client-address].
	Parts []KeyPart
	// FirstOf keys the request by the first part it carries, instead of
	// combining all of them. Default: false.
	FirstOf bool
	// TrustedProxies overrides Config.TrustedProxies for this zone's
	// client-address part. Default: nil, the global list.
	TrustedProxies []netip.Prefix
}

// HeaderMode says when responses carry the RateLimit and RateLimit-Policy
// fields.
type HeaderMode string

// The header modes.
const (
	// HeadersAlways adds the fields to allowed and denied responses. The
	// default.
	HeadersAlways HeaderMode = "always"
	// HeadersDenied adds them to 429 responses only.
	HeadersDenied HeaderMode = "denied"
)

// Proxy configures reverse-proxy mode.
type Proxy struct {
	// Upstream receives requests matched by no rule, and by rules without
	// their own upstream. Default: none; unmatched requests get 404.
	Upstream *url.URL
	// Headers says when proxied responses carry the RateLimit fields.
	// Default: always.
	Headers HeaderMode
	// Rules are tried in order; the first match decides.
	Rules []Rule
}

// Rule maps matching requests to zones and an upstream.
type Rule struct {
	// Host matches the request's host (port ignored), exactly or, as
	// "*.example.com", any subdomain. Default: any host.
	Host string
	// Methods match the request method. Default: any method.
	Methods []string
	// PathPrefix matches the start of the URL path. Default: "/".
	PathPrefix string
	// Zones are checked together, all or nothing. Default: none (the
	// request is proxied unlimited).
	Zones []string
	// Upstream overrides Proxy.Upstream for this rule.
	Upstream *url.URL
}
