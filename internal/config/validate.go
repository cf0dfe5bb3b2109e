package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ident"
	"github.com/sluicehq/sluice/redisstore"
)

// MaxStoreTimeout is the longest store timeout accepted: a rate limiter
// that waits seconds for its store has already failed its callers.
const MaxStoreTimeout = 5 * time.Second

// MinStoreTimeout is the shortest store timeout accepted, the Redis
// store's own minimum.
const MinStoreTimeout = time.Millisecond

// MaxZoneNameLen is the longest zone name, in bytes.
const MaxZoneNameLen = 64

// validate applies defaults and checks what single fields cannot: kinds,
// references between sections, uniqueness.
func (w *walker) validate(c *Config) {
	w.validateStore(&c.Store)
	w.validateLog(&c.Log)
	w.validateRLS(c)
	w.validateListeners(c)
	w.validateZones(c)
	w.validateProxy(c)
	w.validateAdmin(&c.Admin)
	w.validateTop(&c.Top)
}

func (w *walker) validateStore(s *Store) {
	s.Kind = Memory
	kinds := 0
	if s.URL != "" && s.URL != string(Memory) {
		kinds++
		kind, err := urlKind(s.URL)
		if err == nil {
			if err = redisstore.CheckURL(s.URL); err != nil {
				err = errors.New(problem(err))
			}
		}
		if err != nil {
			w.add(w.line("store.url"), "store.url", "%v", err)
		}
		s.Kind = kind
		if s.Password != "" {
			w.add(w.line("store.password"), "store.password", "a store URL carries its own password (redis://:PASSWORD@host:port); password is for sentinel and cluster")
		}
	}
	if s.SentinelMaster != "" || len(s.SentinelAddrs) > 0 {
		kinds++
		s.Kind = Sentinel
		if s.SentinelMaster == "" || len(s.SentinelAddrs) == 0 {
			w.add(w.line("store.sentinel"), "store.sentinel", "needs both master and addrs")
		}
		if strings.ContainsAny(s.SentinelMaster, "/?#@, \t") {
			w.add(w.line("store.sentinel.master"), "store.sentinel.master", "%q: a master name has no '/', '?', '#', '@', ',' or space", s.SentinelMaster)
		}
		w.hostPorts(s.SentinelAddrs, "store.sentinel.addrs")
	}
	if len(s.ClusterSeeds) > 0 {
		kinds++
		s.Kind = Cluster
		w.hostPorts(s.ClusterSeeds, "store.cluster")
	}
	if kinds > 1 {
		w.add(w.line("store"), "store", "set only one of url, sentinel or cluster")
	}
	if s.Kind == Memory && s.Password != "" {
		w.add(w.line("store.password"), "store.password", "the memory store has no password")
	}
	if s.Kind != Memory && s.MaxKeys != 0 {
		w.add(w.line("store.max_keys"), "store.max_keys", "max_keys bounds the memory store; a %s store keeps its keys in Redis", s.Kind)
	}
	if s.Prefix == "" {
		s.Prefix = DefaultStorePrefix
	}
	if strings.ContainsAny(s.Prefix, "{}") {
		w.add(w.line("store.prefix"), "store.prefix", "%q contains a brace, which would change the Redis Cluster hash slot of every key", s.Prefix)
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultStoreTimeout
	}
	switch {
	case s.Timeout > MaxStoreTimeout:
		w.add(w.line("store.timeout"), "store.timeout", "%v is longer than %v; store calls should take milliseconds", s.Timeout, MaxStoreTimeout)
	case s.Timeout < MinStoreTimeout:
		w.add(w.line("store.timeout"), "store.timeout", "%v is shorter than %v; no store call can finish in it", s.Timeout, MinStoreTimeout)
	}
}

// urlKinds maps the schemes of store URLs to the kind of store.
var urlKinds = map[string]StoreKind{
	"redis": Redis, "rediss": Redis,
	"redis-sentinel": Sentinel, "rediss-sentinel": Sentinel,
	"redis-cluster": Cluster, "rediss-cluster": Cluster,
}

// urlKind returns the kind of store a URL names. The Redis store parses
// the rest of the URL when it opens it.
func urlKind(raw string) (StoreKind, error) {
	scheme, rest, _ := strings.Cut(raw, "://")
	kind, ok := urlKinds[scheme]
	if !ok || strings.Trim(rest, "/") == "" {
		return Redis, fmt.Errorf("%q is not memory or a Redis URL (redis://host:port[/db], rediss://..., redis-sentinel://host:port,.../master or redis-cluster://host:port,...)", redactURL(raw))
	}
	return kind, nil
}

// redactURL hides a URL's password in messages.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if at := strings.LastIndex(rest, "@"); ok && at >= 0 {
		return scheme + "://xxxxx" + rest[at:]
	}
	return s
}

func (w *walker) hostPorts(addrs []string, path string) {
	for i, a := range addrs {
		if a == "" {
			continue // reported
		}
		if err := checkHostPort(a); err != nil {
			p := index(path, i)
			w.add(w.line(p), p, "%v", err)
		}
	}
}

func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

func (w *walker) validateLog(l *Log) {
	switch l.Format {
	case "":
		l.Format = Text
	case Text, JSON:
	default:
		w.add(w.line("log.format"), "log.format", "unknown format %q (want text or json)", l.Format)
	}
}

func (w *walker) validateListeners(c *Config) {
	if len(c.Listeners) == 0 {
		c.Listeners = []Listener{{Addr: DefaultAddr, Serve: API}}
	}
	seen := map[string]string{}
	for i := range c.Listeners {
		l, path := &c.Listeners[i], index("listeners", i)
		l.setDefaults()
		if l.Serve != API && l.Serve != ProxyRole && l.Serve != AdminRole && l.Serve != GRPC && !w.failed(path+".serve") {
			w.add(w.line(path+".serve"), path+".serve", "unknown role %q (want api, proxy, admin or grpc)", l.Serve)
		}
		if w.failed(path + ".addr") {
			continue
		}
		if err := checkHostPort(l.Addr); err != nil {
			w.add(w.line(path+".addr"), path+".addr", "%v", err)
		} else if prev, dup := seen[l.Addr]; dup && !strings.HasSuffix(l.Addr, ":0") {
			w.add(w.line(path+".addr"), path+".addr", "%q is also the address of %s", l.Addr, prev)
		}
		seen[l.Addr] = path
	}
}

func (l *Listener) setDefaults() {
	if l.Serve == "" {
		l.Serve = API
	}
	l.ReadHeaderTimeout = cmp(l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	l.ReadTimeout = cmp(l.ReadTimeout, DefaultReadTimeout)
	l.IdleTimeout = cmp(l.IdleTimeout, DefaultIdleTimeout)
	if l.Serve == ProxyRole {
		l.WriteTimeout = cmp(l.WriteTimeout, DefaultProxyWriteTimeout)
		l.MaxBodyBytes = cmp(l.MaxBodyBytes, DefaultProxyMaxBodyBytes)
	} else {
		l.WriteTimeout = cmp(l.WriteTimeout, DefaultAPIWriteTimeout)
		l.MaxBodyBytes = cmp(l.MaxBodyBytes, DefaultAPIMaxBodyBytes)
	}
}

// cmp returns v, or def when v is zero.
func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (w *walker) validateZones(c *Config) {
	if len(c.Zones) == 0 && c.RLS.ConfigDir == "" {
		w.add(w.line("zones"), "zones", "at least one zone is required (or rls.config_dir)")
	}
	seen := map[string]string{}
	for i := range c.Zones {
		z, path := &c.Zones[i], index("zones", i)
		if w.failed(path+".name") || w.failed(path) && z.Name == "" {
			// reported
		} else if err := checkZoneName(z.Name); err != nil {
			w.add(w.line(path), path+".name", "%v", err)
		} else if prev, dup := seen[z.Name]; dup {
			w.add(w.line(path+".name"), path+".name", "zone %q is also defined at %s", z.Name, prev)
		}
		seen[z.Name] = path
		w.validateZone(z, path)
	}
}

func checkZoneName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("missing name")
	case len(name) > MaxZoneNameLen:
		return fmt.Errorf("name %q is longer than %d bytes", name, MaxZoneNameLen)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || i > 0 && strings.ContainsRune("._-", r)
		if !ok {
			return fmt.Errorf("name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", name)
		}
	}
	return nil
}

// stateOf is the part of l's identity that names its state, as every
// store and layer reads it (internal/ident): two limits of a zone with the
// same one would share their counters.
func stateOf(l sluice.Limit) ident.Limit {
	return ident.LimitOf(string(l.Algo()), l.Window, l.Bucket())
}

func (w *walker) validateZone(z *Zone, path string) {
	lp := path + ".limits"
	switch {
	case w.failed(lp) || w.failed(path) && len(z.Limits) == 0:
		// reported
	case len(z.Limits) == 0:
		w.add(w.line(path), lp, "at least one limit is required, such as limits: [100r/m]")
	case len(z.Limits) > sluice.MaxHits:
		w.add(w.line(lp), lp, "%d limits, more than %d", len(z.Limits), sluice.MaxHits)
	}
	for i, l := range z.Limits {
		for j, o := range z.Limits[:i] {
			switch {
			case stateOf(l) == stateOf(o):
				w.add(w.line(lp), index(lp, i), "limit %q would share its counters with limits[%d] (same algorithm and window)", l.Label(), j)
			case l.Label() == o.Label():
				w.add(w.line(lp), index(lp, i), "label %q is also used by limits[%d]; give one a name", l.Label(), j)
			}
		}
	}
	if len(z.Key.Parts) == 0 {
		z.Key.Parts = []KeyPart{{Kind: ClientAddress}}
	}
	switch z.Failure {
	case "":
		z.Failure = FailOpen
	case FailOpen, FailClosed, FailLocal:
	default:
		if w.failed(path + ".failure") {
			break
		}
		w.add(w.line(path+".failure"), path+".failure", "unknown failure policy %q (want open, closed or local)", z.Failure)
	}
	w.validateMode(z, path)
}

// validateMode checks a zone's mode and sync interval.
func (w *walker) validateMode(z *Zone, path string) {
	switch z.Mode {
	case "":
		z.Mode = SyncMode
	case SyncMode, AsyncMode:
	default:
		w.add(w.line(path+".mode"), path+".mode", "unknown mode %q (want sync or async)", z.Mode)
	}
	ip := path + ".sync_interval"
	switch {
	case z.SyncInterval < 0 || z.SyncInterval > time.Minute:
		w.add(w.line(ip), ip, "must be between 0 and 1m, got %v", z.SyncInterval)
	case z.SyncInterval != 0 && z.Mode != AsyncMode:
		w.add(w.line(ip), ip, "is only used with mode: async")
	case z.SyncInterval == 0 && z.Mode == AsyncMode:
		z.SyncInterval = DefaultSyncInterval
	}
	if z.Mode == AsyncMode && z.SyncInterval > 0 {
		// Pending cost is dropped once older than its window: an interval
		// as long would drop what it should send.
		for _, l := range z.Limits {
			if l.Window > 0 && z.SyncInterval >= l.Window {
				w.add(w.line(ip), ip, "%v must be shorter than the zone's smallest window (%v, limit %q)", z.SyncInterval, l.Window, l.String())
				break
			}
		}
	}
	switch {
	case z.Processes != 0 && z.Mode != AsyncMode:
		w.add(w.line(path+".processes"), path+".processes", "is only used with mode: async")
	case z.Processes == 0 && z.Mode == AsyncMode:
		z.Processes = 1
	}
	if z.FirstSight != 0 && z.Mode != AsyncMode {
		w.add(w.line(path+".first_sight"), path+".first_sight", "is only used with mode: async")
	}
}

func (w *walker) validateProxy(c *Config) {
	px := &c.Proxy
	switch px.Headers {
	case "":
		px.Headers = HeadersAlways
	case HeadersAlways, HeadersDenied:
	default:
		if w.failed("proxy.headers") {
			break
		}
		w.add(w.line("proxy.headers"), "proxy.headers", "unknown mode %q (want always or denied)", px.Headers)
	}
	proxied := slices.ContainsFunc(c.Listeners, func(l Listener) bool { return l.Serve == ProxyRole })
	configured := px.Upstream != nil || len(px.Rules) > 0
	switch {
	case proxied && !configured:
		w.add(w.line("listeners"), "proxy", "a listener serves proxy but proxy has no upstream and no rules")
	case configured && !proxied:
		w.add(w.line("proxy"), "proxy", "proxy is configured but no listener has serve: proxy")
	}
	for i := range px.Rules {
		w.validateRule(c, &px.Rules[i], index("proxy.rules", i))
	}
}

func (w *walker) validateRule(c *Config, r *Rule, path string) {
	if r.PathPrefix == "" {
		r.PathPrefix = "/"
	}
	if !strings.HasPrefix(r.PathPrefix, "/") {
		w.add(w.line(path+".path_prefix"), path+".path_prefix", "%q must start with /", r.PathPrefix)
	}
	if r.Host != "" {
		if err := checkRuleHost(r.Host); err != nil {
			w.add(w.line(path+".host"), path+".host", "%v", err)
		}
	}
	for i, m := range r.Methods {
		r.Methods[i] = strings.ToUpper(m)
		if m != "" && !validToken(m) {
			w.add(w.line(index(path+".methods", i)), index(path+".methods", i), "%q is not an HTTP method", m)
		}
	}
	if r.Upstream == nil && c.Proxy.Upstream == nil && !w.failed(path+".upstream") && !w.failed("proxy.upstream") {
		w.add(w.line(path), path, "no upstream: set upstream here or proxy.upstream")
	}
	w.validateRuleZones(c, r, path+".zones")
}

func (w *walker) validateRuleZones(c *Config, r *Rule, path string) {
	hits, group, groupZone := 0, "", ""
	// A zone whose name could not be read is reported; the rules that
	// name it are not "unknown zone" problems on top.
	unnamed := c.Zone("") != nil
	for i, name := range r.Zones {
		p := index(path, i)
		z := c.Zone(name)
		if z == nil {
			if name != "" && !unnamed {
				w.add(w.line(p), p, "unknown zone %q", name)
			}
			continue
		}
		if slices.Index(r.Zones, name) < i {
			w.add(w.line(p), p, "zone %q is listed twice", name)
		}
		hits += len(z.Limits)
		if z.Group != "" && group != "" && z.Group != group {
			w.add(w.line(p), p, "zone %q has group %q but zone %q has group %q; zones checked together share one group", name, z.Group, groupZone, group)
		}
		if z.Group != "" {
			group, groupZone = z.Group, name
		}
	}
	if hits > sluice.MaxHits {
		w.add(w.line(path), path, "the zones have %d limits in all, more than %d per check", hits, sluice.MaxHits)
	}
}

// checkRuleHost checks a rule's host: a DNS name (letters, digits, '-'
// and '_' in dot-separated labels of 1 to 63 bytes, at most 253 bytes in
// all, no trailing dot), an IPv4 address, or "*." and a DNS name.
func checkRuleHost(host string) error {
	name := strings.TrimPrefix(host, "*.")
	bad := func(why string) error {
		return fmt.Errorf("%q is not a host name or *.domain: %s", host, why)
	}
	if len(name) > 253 {
		return bad("longer than 253 bytes")
	}
	for label := range strings.SplitSeq(name, ".") {
		switch {
		case label == "":
			return bad("empty label (no leading, trailing or double dots)")
		case len(label) > 63:
			return bad("a label is longer than 63 bytes")
		case label[0] == '-' || label[len(label)-1] == '-':
			return bad("a label starts or ends with '-'")
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return bad(fmt.Sprintf("%q is not a letter, digit, '-' or '_' (no port, no scheme, no IPv6)", c))
			}
		}
	}
	return nil
}

func (w *walker) validateAdmin(a *Admin) {
	if len(a.Endpoints) == 0 && !w.failed("admin.endpoints") {
		a.Endpoints = []Endpoint{EndpointReset}
	}
	for i, e := range a.Endpoints {
		p := index("admin.endpoints", i)
		switch {
		case e == "":
		case e != EndpointReset && e != EndpointCheck && e != EndpointMetrics:
			w.add(w.line(p), p, "unknown endpoint %q (want reset, check or metrics)", e)
		case slices.Index(a.Endpoints, e) < i:
			w.add(w.line(p), p, "%q is listed twice", e)
		}
	}
}
