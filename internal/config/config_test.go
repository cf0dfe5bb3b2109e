package config

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestExampleFile(t *testing.T) {
	c, err := Load("../../examples/sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(c.Zones), 5; got != want {
		t.Fatalf("zones: got %d, want %d", got, want)
	}
	tok := c.Zone("per-token")
	if tok == nil || tok.Failure != FailClosed || tok.Key.Parts[0] != (KeyPart{Kind: Query, Name: "token"}) {
		t.Errorf("per-token: got %+v", tok)
	}
	day := tok.Limits[1]
	if day.Name != "day" || day.Algorithm != sluice.Buckets || day.Resolution != time.Hour || day.Rate != 5000 || day.Window != 24*time.Hour {
		t.Errorf("per-token day limit: got %+v", day)
	}
	if got := tok.Limits[0].Algorithm; got != sluice.SlidingWindow {
		t.Errorf("per-token minute algorithm: got %q", got)
	}
	if c.Zone("login-trial").Limits[0].Shadow != true {
		t.Error("login-trial: zone shadow not applied to its limit")
	}
	if got := c.Listeners[1]; got.Serve != ProxyRole || got.WriteTimeout != 2*time.Minute || got.MaxBodyBytes != DefaultProxyMaxBodyBytes {
		t.Errorf("proxy listener: got %+v", got)
	}
	if got, want := c.TrustedProxies[0], netip.MustParsePrefix("127.0.0.1/32"); got != want {
		t.Errorf("trusted_proxies[0]: got %v, want %v", got, want)
	}
	if got := c.Proxy.Rules[3].PathPrefix; got != "/" {
		t.Errorf("rules[3].path_prefix: got %q", got)
	}
	if c.Proxy.Rules[0].Methods[1] != "PUT" || c.Proxy.Upstream.Host != "127.0.0.1:9000" {
		t.Errorf("proxy: got %+v", c.Proxy)
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse("min.yaml", []byte("zones:\n  - name: a\n    limits: 5r/s\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := c.Listeners[0]
	if l.Addr != DefaultAddr || l.Serve != API || l.ReadHeaderTimeout != DefaultReadHeaderTimeout ||
		l.WriteTimeout != DefaultAPIWriteTimeout || l.IdleTimeout != DefaultIdleTimeout || l.MaxBodyBytes != DefaultAPIMaxBodyBytes {
		t.Errorf("listener defaults: got %+v", l)
	}
	if c.Store.Kind != Memory || c.Store.Timeout != DefaultStoreTimeout || c.Store.Prefix != DefaultStorePrefix {
		t.Errorf("store defaults: got %+v", c.Store)
	}
	z := c.Zones[0]
	if z.Failure != FailOpen || len(z.Key.Parts) != 1 || z.Key.Parts[0].Kind != ClientAddress || z.Limits[0].Algo() != sluice.SlidingWindow {
		t.Errorf("zone defaults: got %+v", z)
	}
	if c.Log.Format != Text || c.Proxy.Headers != HeadersAlways {
		t.Errorf("log/proxy defaults: got %+v %+v", c.Log, c.Proxy)
	}
}

func TestZoneModes(t *testing.T) {
	for _, tc := range []struct {
		yaml      string
		mode      Mode
		interval  time.Duration
		processes int
		first     int64
	}{
		{"", SyncMode, 0, 0, 0},
		{"    mode: sync\n", SyncMode, 0, 0, 0},
		{"    mode: async\n", AsyncMode, DefaultSyncInterval, 1, 0},
		{"    mode: async\n    sync_interval: 250ms\n    processes: 4\n", AsyncMode, 250 * time.Millisecond, 4, 0},
		{"    mode: async\n    first_sight: 1\n", AsyncMode, DefaultSyncInterval, 1, 1},
		{"    mode: async\n    first_sight: 0\n", AsyncMode, DefaultSyncInterval, 1, 0},
	} {
		c, err := Parse("c.yaml", []byte("zones:\n  - name: a\n    limits: 1r/s\n"+tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if z := c.Zones[0]; z.Mode != tc.mode || z.SyncInterval != tc.interval || z.Processes != tc.processes || z.FirstSight != tc.first {
			t.Errorf("%q: mode %q, interval %v, processes %d, first sight %d; want %q, %v, %d, %d", tc.yaml, z.Mode, z.SyncInterval, z.Processes, z.FirstSight, tc.mode, tc.interval, tc.processes, tc.first)
		}
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	z := c.Zone(DemoZone)
	if z == nil || len(z.Limits) != 1 || z.Limits[0].String() != "10r/m" {
		t.Fatalf("demo zone: got %+v", z)
	}
	if c.Listeners[0].Addr != "127.0.0.1:8080" || c.Store.Kind != Memory {
		t.Errorf("got %+v", c)
	}
}

func TestStoreKinds(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want StoreKind
	}{
		{"url: memory", Memory},
		{"url: redis://:secret@localhost:6379/2", Redis},
		{"url: rediss://cache.example.com:6380", Redis},
		{"sentinel: {master: mymaster, addrs: [10.0.0.1:26379, 10.0.0.2:26379]}", Sentinel},
		{"cluster: [10.0.0.1:7000, 10.0.0.2:7000]", Cluster},
		{"url: 'redis-sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster'", Sentinel},
		{"url: 'rediss-cluster://10.0.0.1:7000,10.0.0.2:7000'", Cluster},
	} {
		c, err := Parse("s.yaml", []byte("store: {"+tt.yaml+"}\nzones: [{name: a, limits: 1r/s}]\n"))
		if err != nil {
			t.Errorf("%s: %v", tt.yaml, err)
			continue
		}
		if c.Store.Kind != tt.want {
			t.Errorf("%s: kind %q, want %q", tt.yaml, c.Store.Kind, tt.want)
		}
	}
}

func TestErrors(t *testing.T) {
	const zone = "zones:\n  - name: a\n    limits: 1r/s\n"
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"empty", "", "c.yaml: the file is empty"},
		{"syntax", "zones: [\n  - a: b\n", "c.yaml:"},
		{"not a mapping", "- a\n", "want a mapping"},
		{"unknown top field", "zone:\n  - name: a\n", `c.yaml:1: zone: unknown field "zone" (did you mean "zones"?)`},
		{"unknown field, no near one", "zones: [{name: a, limits: 1r/s, colour: red}]\n", `c.yaml:1: zones[0].colour: unknown field "colour" (want one of algorithm, failure, first_sight, group, key, limits, mode, name, processes, resolution, shadow, show_keys, sync_interval)`},
		{"zero rate", "zones:\n  - name: a\n    limits: [10r/s]\n  - name: b\n    limits: [10r/s]\n  - name: c\n    limits:\n      - 0r/m\n",
			`c.yaml:8: zones[2].limits[0]: limit "0r/m": rate must be > 0`},
		{"bad spec string", "zones:\n  - name: a\n    limits: 10 per minute\n", `c.yaml:3: zones[0].limits: limit "10 per minute": missing "r/"`},
		{"unknown unit", "zones:\n  - name: a\n    limits: [10r/w]\n", `c.yaml:3: zones[0].limits[0]: limit "10r/w": period "w"`},
		{"no zones", "store: {url: memory}\n", "zones: at least one zone is required"},
		{"no limits", "zones:\n  - name: a\n", "c.yaml:2: zones[0].limits: at least one limit is required"},
		{"duplicate zone", zone + "  - name: a\n    limits: 2r/s\n", `c.yaml:4: zones[1].name: zone "a" is also defined at zones[0]`},
		{"bad zone name", "zones:\n  - name: 'a b'\n    limits: 1r/s\n", `zones[0].name: name "a b"`},
		{"bad algorithm", "zones:\n  - name: a\n    limits: 1r/s\n    algorithm: leaky\n", `c.yaml:4: zones[0].algorithm: unknown algorithm "leaky"`},
		{"resolution does not divide", "zones:\n  - name: a\n    limits: 10r/m\n    algorithm: buckets\n    resolution: 7s\n", "does not divide the window"},
		{"log rate too high", "zones:\n  - name: a\n    limits: [{spec: 20000r/s, algorithm: log}]\n", "a log limit's rate must be <= 10000"},
		{"shared counters", "zones:\n  - name: a\n    limits: 1r/s, 2r/s\n", "would share its counters"},
		{"missing spec", "zones:\n  - name: a\n    limits: [{name: x}]\n", "c.yaml:3: zones[0].limits[0]: missing spec"},
		{"bad key", "zones:\n  - name: a\n    limits: 1r/s\n    key: ip\n", `c.yaml:4: zones[0].key: unknown key source "ip"`},
		{"bad key in list", "zones:\n  - name: a\n    limits: 1r/s\n    key: [client-address, \"header:a b\"]\n", `c.yaml:4: zones[0].key[1]: key source "header:a b"`},
		{"from and first_of", zone + "    key: {from: client-address, first_of: [header:X]}\n", "c.yaml:4: zones[0].key: set either from"},
		{"bad failure", zone + "    failure: maybe\n", `c.yaml:4: zones[0].failure: unknown failure policy "maybe"`},
		{"bad mode", zone + "    mode: later\n", `c.yaml:4: zones[0].mode: unknown mode "later"`},
		{"interval without async", zone + "    sync_interval: 1s\n", `c.yaml:4: zones[0].sync_interval: is only used with mode: async`},
		{"interval too long", zone + "    mode: async\n    sync_interval: 2m\n", `c.yaml:5: zones[0].sync_interval: must be between 0 and 1m`},
		{"interval as long as a window", "zones:\n  - name: a\n    limits: 10r/m, 1r/100ms\n    mode: async\n", `zones[0].sync_interval: 100ms must be shorter than the zone's smallest window (100ms, limit "1r/100ms")`},
		{"processes without async", zone + "    processes: 3\n", `c.yaml:4: zones[0].processes: is only used with mode: async`},
		{"processes not positive", zone + "    mode: async\n    processes: 0\n", `c.yaml:5: zones[0].processes: must be > 0`},
		{"first sight without async", zone + "    first_sight: 1\n", `c.yaml:4: zones[0].first_sight: is only used with mode: async`},
		{"first sight negative", zone + "    mode: async\n    first_sight: -1\n", `c.yaml:5: zones[0].first_sight: must be between 0 and 1000000000, got -1`},
		{"first sight not an integer", zone + "    mode: async\n    first_sight: yes\n", `c.yaml:5: zones[0].first_sight: want an integer`},
		{"bad shadow", zone + "    shadow: perhaps\n", `c.yaml:4: zones[0].shadow: want true or false, got "perhaps"`},
		{"bad cidr", zone + "trusted_proxies: [10.0.0.0/33]\n", `c.yaml:4: trusted_proxies[0]: "10.0.0.0/33" is not a CIDR`},
		{"bad store url", zone + "store: {url: 'http://x'}\n", `c.yaml:4: store.url: "http://x" is not memory or a Redis URL`},
		{"password hidden", zone + "store: {url: 'mysql://u:hunter2@x'}\n", "xxxxx"},
		{"two stores", zone + "store: {url: 'redis://x:1', cluster: ['a:1']}\n", "set only one of url, sentinel or cluster"},
		{"sentinel half", zone + "store: {sentinel: {master: m}}\n", "store.sentinel: needs both master and addrs"},
		{"cluster seed", zone + "store: {cluster: [nohost]}\n", `store.cluster[0]: "nohost" is not host:port`},
		{"store timeout", zone + "store: {timeout: 1m}\n", "store.timeout: 1m0s is longer than 5s"},
		{"bad duration", zone + "store: {timeout: fast}\n", `store.timeout: want a duration such as 50ms or 30s, got "fast"`},
		{"bad log", zone + "log: {format: xml, level: loud}\n", "log.level: unknown log level"},
		{"bad listener", zone + "listeners: [{addr: 'localhost'}]\n", `listeners[0].addr: "localhost" is not host:port`},
		{"bad role", zone + "listeners: [{addr: ':1', serve: smtp}]\n", `listeners[0].serve: unknown role "smtp"`},
		{"duplicate listener", zone + "listeners: [{addr: ':1'}, {addr: ':1'}]\n", `listeners[1].addr: ":1" is also the address of listeners[0]`},
		{"negative body", zone + "listeners: [{addr: ':1', max_body_bytes: -1}]\n", "max_body_bytes: must be > 0, got -1"},
		{"proxy without listener", zone + "proxy: {upstream: 'http://x'}\n", "proxy is configured but no listener has serve: proxy"},
		{"listener without proxy", zone + "listeners: [{addr: ':1', serve: proxy}]\n", "a listener serves proxy but proxy has no upstream"},
		{"unknown rule zone", zone + "listeners: [{addr: ':1', serve: proxy}]\nproxy:\n  upstream: http://x\n  rules:\n    - zones: [a, b]\n", `c.yaml:8: proxy.rules[0].zones[1]: unknown zone "b"`},
		{"rule without upstream", zone + "listeners: [{addr: ':1', serve: proxy}]\nproxy:\n  rules:\n    - zones: [a]\n", "proxy.rules[0]: no upstream"},
		{"bad upstream", zone + "listeners: [{addr: ':1', serve: proxy}]\nproxy: {upstream: 'ftp://x'}\n", `proxy.upstream: upstream "ftp://x" is not an http://`},
		{"bad path prefix", zone + "listeners: [{addr: ':1', serve: proxy}]\nproxy: {upstream: 'http://x', rules: [{path_prefix: api}]}\n", `path_prefix: "api" must start with /`},
		{"bad host", zone + "listeners: [{addr: ':1', serve: proxy}]\nproxy: {upstream: 'http://x', rules: [{host: 'a.com:80'}]}\n", `host: "a.com:80" is not a host name`},
		{"group mismatch", "zones:\n  - {name: a, limits: 1r/s, group: g}\n  - {name: b, limits: 1r/s, group: h}\nlisteners: [{addr: ':1', serve: proxy}]\nproxy: {upstream: 'http://x', rules: [{zones: [a, b]}]}\n", "zones checked together share one group"},
		{"duplicate field", "zones:\n  - name: a\n    name: b\n    limits: 1r/s\n", `c.yaml:3: zones[0].name: field "name" given twice`},
		{"nested aliases do not expand", "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\nzones: [{name: z, limits: 1r/s, key: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]}]\n", "zones[0].key[9]: want a string, got a list"},
		{"too many nodes", "z: &z {name: a, limits: &l [1r/s, 1r/m, 1r/h], key: &k [client-address, header:X], shadow: false}\nzones: [" + strings.Repeat("*z, ", 20000) + "]\n", "configuration too complex"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err, tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("error %v is not a *config.Error", err)
			}
		})
	}
}

func TestErrorsReportedTogether(t *testing.T) {
	_, err := Parse("c.yaml", []byte("zones:\n  - name: a\n    limits: 0r/s\n    shadow: x\n"))
	if err == nil || !strings.Contains(err.Error(), "c.yaml:3:") || !strings.Contains(err.Error(), "c.yaml:4:") {
		t.Errorf("got %v, want problems on lines 3 and 4", err)
	}
}

func TestKeyFirstOf(t *testing.T) {
	c, err := Parse("c.yaml", []byte("zones:\n  - name: a\n    limits: 1r/s\n    key:\n      first_of: [header:x-api-key, client-address]\n      trusted_proxies: [10.0.0.0/8]\n"))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Zones[0].Key
	want := []KeyPart{{Kind: Header, Name: "X-Api-Key"}, {Kind: ClientAddress}}
	if !k.FirstOf || len(k.Parts) != 2 || k.Parts[0] != want[0] || k.Parts[1] != want[1] || len(k.TrustedProxies) != 1 {
		t.Errorf("got %+v, want first_of %v", k, want)
	}
}

func TestZoneTrustsNoProxy(t *testing.T) {
	c, err := Parse("c.yaml", []byte("trusted_proxies: [10.0.0.0/8]\nzones:\n  - name: a\n    limits: 1r/s\n    key: {from: client-address, trusted_proxies: []}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tp := c.Zones[0].Key.TrustedProxies; tp == nil || len(tp) != 0 {
		t.Errorf("zone trusted_proxies: got %#v, want an empty, non-nil list", tp)
	}
}

func TestAliasesExpand(t *testing.T) {
	c, err := Parse("c.yaml", []byte("zones:\n  - name: a\n    limits: &l [5r/s]\n  - name: b\n    limits: *l\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Zones[1].Limits[0].Rate != 5 {
		t.Errorf("got %+v", c.Zones[1])
	}
}

func TestOverride(t *testing.T) {
	c := Default()
	err := c.Override(Overrides{Listen: "127.0.0.1:0", Store: "redis://localhost:6379", LogFormat: "json", LogLevel: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listeners[0].Addr != "127.0.0.1:0" || c.Store.Kind != Redis || c.Log.Format != JSON || c.Log.Level.String() != "DEBUG" {
		t.Errorf("got %+v %+v %+v", c.Listeners, c.Store, c.Log)
	}
	// A store URL replaces a file's cluster store, password included.
	c, err = Parse("c.yaml", []byte("zones: [{name: a, limits: 1r/s}]\nstore: {cluster: ['h:1'], password: p}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Override(Overrides{Store: "redis://localhost:6379"}); err != nil || c.Store.Kind != Redis || c.Store.Password != "" {
		t.Errorf("store override of a cluster file: %v, %+v", err, c.Store)
	}
	for _, o := range []Overrides{{Listen: "nope"}, {Store: "http://x"}, {Store: "redis://x:99999"}, {LogFormat: "xml"}, {LogLevel: "loud"}} {
		if err := Default().Override(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(t.TempDir() + "/missing.yaml")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want ErrNotExist", err)
	}
}

func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("../../examples/sluice.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte("zones: [{name: a, limits: 1r/s}]"))
	f.Add([]byte("zones:\n  - name: a\n    limits: [{spec: 10r/m, algorithm: buckets, resolution: 6s}]\n    key: {from: [header:X, query:t], trusted_proxies: [::1]}\n"))
	f.Add([]byte("a: &a [*a]"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data)
		if err != nil {
			if c != nil {
				t.Fatal("config returned with an error")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *config.Error", err)
			}
			return
		}
		for _, z := range c.Zones {
			if len(z.Limits) == 0 || len(z.Key.Parts) == 0 || z.Failure == "" {
				t.Fatalf("zone %q not defaulted: %+v", z.Name, z)
			}
			for _, l := range z.Limits {
				if err := l.Validate(); err != nil {
					t.Fatalf("zone %q: invalid limit accepted: %v", z.Name, err)
				}
			}
		}
		if len(c.Listeners) == 0 {
			t.Fatal("no listeners")
		}
	})
}

// TestEmptyAndOddValuesRefused: an empty or odd
// value is a problem at its own line, never silently the default.
func TestEmptyAndOddValuesRefused(t *testing.T) {
	const zone = "zones:\n  - name: a\n    limits: 1r/s\n"
	const proxied = "listeners: [{addr: ':1', serve: proxy}]\nproxy:\n  upstream: http://x\n  rules:\n"
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"store timeout 1ns", zone + "store: {timeout: 1ns}\n", "c.yaml:4: store.timeout: 1ns is shorter than 1ms"},
		{"key empty list", zone + "    key: []\n", "c.yaml:4: zones[0].key: want a list, got an empty list"},
		{"first_of empty", zone + "    key: {first_of: []}\n", "c.yaml:4: zones[0].key.first_of: want a list, got an empty list"},
		{"key empty mapping", zone + "    key: {}\n", "c.yaml:4: zones[0].key: want a mapping of first_of, from, trusted_proxies, got an empty mapping"},
		{"key null", zone + "    key:\n", "c.yaml:4: zones[0].key: want a list, got nothing (omit the field"},
		{"shadow quoted yes", zone + "    shadow: \"yes\"\n", `c.yaml:4: zones[0].shadow: want true or false, got "yes"`},
		{"shadow bare yes", zone + "    shadow: yes\n", `c.yaml:4: zones[0].shadow: want true or false, got "yes"`},
		{"shadow quoted true", zone + "    shadow: \"true\"\n", `c.yaml:4: zones[0].shadow: want true or false, got "true"`},
		{"host double dot", zone + proxied + "    - {host: foo..com, zones: [a]}\n", `c.yaml:8: proxy.rules[0].host: "foo..com" is not a host name or *.domain: empty label`},
		{"host trailing dot", zone + proxied + "    - {host: foo.com., zones: [a]}\n", `proxy.rules[0].host: "foo.com." is not a host name`},
		{"host underscore dash", zone + proxied + "    - {host: -foo.com}\n", `a label starts or ends with '-'`},
		{"host empty", zone + proxied + "    - {host: '', zones: [a]}\n", `c.yaml:8: proxy.rules[0].host: want a string, got "" (omit the field`},
		{"methods empty", zone + proxied + "    - {methods: [], zones: [a]}\n", "c.yaml:8: proxy.rules[0].methods: want a list, got an empty list"},
		{"path prefix null", zone + proxied + "    - path_prefix:\n      zones: [a]\n", "c.yaml:8: proxy.rules[0].path_prefix: want a string, got nothing"},
		{"store url empty", zone + "store: {url: ''}\n", `c.yaml:4: store.url: want a string, got ""`},
		{"store null", zone + "store:\n", "c.yaml:4: store: want a mapping of cluster, max_keys, password, prefix, sentinel, timeout, url, got nothing"},
		{"listeners empty", zone + "listeners: []\n", "c.yaml:4: listeners: want a list, got an empty list"},
		{"cluster empty", zone + "store: {cluster: []}\n", "c.yaml:4: store.cluster: want a list, got an empty list"},
		{"max_keys zero", zone + "store: {max_keys: 0}\n", "c.yaml:4: store.max_keys: must be > 0, got 0"},
		{"max_keys string", zone + "store: {max_keys: '100'}\n", `c.yaml:4: store.max_keys: want an integer, got "100"`},
		{"max_keys with redis", zone + "store: {url: 'redis://x:1', max_keys: 10}\n", "store.max_keys: max_keys bounds the memory store"},
		{"redis url port", zone + "store: {url: 'redis://x:99999'}\n", `c.yaml:4: store.url: redis URL "redis://x:99999"`},
		{"sentinel master", zone + "store: {sentinel: {master: 'a/b', addrs: ['h:1']}}\n", `c.yaml:4: store.sentinel.master: "a/b": a master name has no '/'`},
		{"prefix brace", zone + "store: {prefix: 'a{b}'}\n", `c.yaml:4: store.prefix: "a{b}" contains a brace`},
		{"password with url", zone + "store: {url: 'redis://x:1', password: p}\n", "store.password: a store URL carries its own password"},
		{"level empty", zone + "log: {level: ''}\n", `c.yaml:4: log.level: want a string, got ""`},
		{"limit name not ASCII", "zones:\n  - name: a\n    limits: [{spec: 1r/s, name: minüte}]\n", `c.yaml:3: zones[0].limits[0]: name "minüte": use printable ASCII`},
		{"second document", zone + "---\nzones: []\n", "c.yaml:5: a second document (after ---)"},
		{"admin endpoint", zone + "admin: {endpoints: [reset, purge]}\n", `c.yaml:4: admin.endpoints[1]: unknown endpoint "purge"`},
		{"admin role typo", zone + "listeners: [{addr: ':1', serve: admn}]\n", `listeners[0].serve: unknown role "admn" (want api, proxy, admin or grpc)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestSyntaxErrorLine: a YAML syntax error names
// the line where the parser found it, once.
func TestSyntaxErrorLine(t *testing.T) {
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"bad indentation", "zones:\n  - name: a\n    limits: 10r/m\n   bad: x\n", "c.yaml:4: did not find expected '-' indicator (parsing a block collection started on line 2)"},
		{"unclosed flow list", "store: {url: memory}\nzones:\n  - name: a\n    limits: [10r/m\n  - name: b\n", "c.yaml:5: did not find expected ',' or ']' (parsing a flow sequence started on line 4)"},
		{"tab", "zones:\n  - name: a\n\tlimits: 10r/m\n", "c.yaml:3: found a tab character that violates indentation (scanning a plain scalar started on line 2)"},
		{"mapping in scalar", "log: {format: text}\nstore: a: b\n", "c.yaml:2: mapping values are not allowed in this context"},
		{"unknown anchor", "zones: *nope\n", "c.yaml:1: unknown anchor 'nope' referenced"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tt.yaml))
			if err == nil || err.Error() != tt.want {
				t.Errorf("got %q, want %q", err, tt.want)
			}
		})
	}
}

// TestAllProblemsAtOnce: problems of every kind
// (a field's shape, a value, a cross-section reference, a default's
// bound) come in one run, each at its own line, and none is derived from
// another.
func TestAllProblemsAtOnce(t *testing.T) {
	const yaml = `store:
  timeout: 1ns
zones:
  - name: a
    limits: 1r/s
    shadow: "yes"
  - name: a
    limits: 2r/s
    key: []
listeners:
  - {addr: ':1', serve: proxy}
proxy:
  upstream: http://x
  rules:
    - {host: foo..com, zones: [a, missing]}
`
	_, err := Parse("c.yaml", []byte(yaml))
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		"c.yaml:2: store.timeout: 1ns is shorter than 1ms; no store call can finish in it",
		`c.yaml:6: zones[0].shadow: want true or false, got "yes"`,
		`c.yaml:7: zones[1].name: zone "a" is also defined at zones[0]`,
		"c.yaml:9: zones[1].key: want a list, got an empty list (omit the field to get its default)",
		`c.yaml:15: proxy.rules[0].host: "foo..com" is not a host name or *.domain: empty label (no leading, trailing or double dots)`,
		`c.yaml:15: proxy.rules[0].zones[1]: unknown zone "missing"`,
	}
	got := strings.Split(err.Error(), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAdminTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(dir+"/"+name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("token", "0123456789abcdef0123\n")
	write("short", "abc\n")
	write("ok.yaml", "zones: [{name: a, limits: 1r/s}]\nadmin: {token_file: token}\n")
	write("short.yaml", "zones: [{name: a, limits: 1r/s}]\nadmin: {token_file: short}\n")
	write("missing.yaml", "zones: [{name: a, limits: 1r/s, shadow: 1}]\nadmin: {token_file: nothing-here}\n")
	c, err := Load(dir + "/ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin.Token != "0123456789abcdef0123" || !c.Admin.IsAdmin(EndpointReset) || c.Admin.IsAdmin(EndpointCheck) {
		t.Errorf("admin %+v: want the file's token and [reset]", c.Admin)
	}
	_, err = Load(dir + "/short.yaml")
	if err == nil || !strings.Contains(err.Error(), "short.yaml:2: admin.token_file: short: the token is 3 bytes, fewer than 16") || strings.Contains(err.Error(), "abc") {
		t.Errorf("short token: got %v", err)
	}
	_, err = Load(dir + "/missing.yaml")
	if err == nil || !strings.Contains(err.Error(), "missing.yaml:1: zones[0].shadow") || !strings.Contains(err.Error(), "missing.yaml:2: admin.token_file: open ") {
		t.Errorf("missing token file: got %v, want the shadow and the token file problems together", err)
	}
	c = Default()
	if err := c.Override(Overrides{AdminToken: "short"}); err == nil || strings.Contains(err.Error(), "short") {
		t.Errorf("short env token: got %v", err)
	}
	if err := c.Override(Overrides{AdminToken: "0123456789abcdef-env"}); err != nil || c.Admin.Token != "0123456789abcdef-env" {
		t.Errorf("env token: got %v, %q", err, c.Admin.Token)
	}
}

// TestTopDigestSecretFile: top.digest_secret_file is read by Load like
// the admin token (a short secret refused without quoting it), and
// SLUICE_TOP_DIGEST_SECRET wins over it.
func TestTopDigestSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(dir+"/"+name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("secret", "fleet-digest-secret-0123\n")
	write("short", "abc\n")
	write("ok.yaml", "zones: [{name: a, limits: 1r/s}]\ntop: {digest_secret_file: secret}\n")
	write("short.yaml", "zones: [{name: a, limits: 1r/s}]\ntop: {digest_secret_file: short}\n")
	c, err := Load(dir + "/ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Top.DigestSecret != "fleet-digest-secret-0123" {
		t.Errorf("digest secret %q, want the file's", c.Top.DigestSecret)
	}
	if _, err := Load(dir + "/short.yaml"); err == nil || !strings.Contains(err.Error(), "short.yaml:2: top.digest_secret_file: short:") || strings.Contains(err.Error(), "abc") {
		t.Errorf("short secret: got %v", err)
	}
	if err := c.Override(Overrides{TopDigestSecret: "0123456789abcdef-env"}); err != nil || c.Top.DigestSecret != "0123456789abcdef-env" {
		t.Errorf("env secret: got %v, %q", err, c.Top.DigestSecret)
	}
	if err := c.Override(Overrides{TopDigestSecret: "short"}); err == nil || strings.Contains(err.Error(), "short") {
		t.Errorf("short env secret: got %v", err)
	}
}

// TestManyProblemsStayLinear: a file where every one of thousands of
// zones has problems parses in time linear in its size (a reload must not
// stall on a broken file). It compares a file with ten times the zones of
// another, not a wall-clock bound, so a busy machine does not fail it: a
// linear parser takes about 10x, a quadratic one 100x; the bound is 40x
// (plus a second for timer noise on the small file).
func TestManyProblemsStayLinear(t *testing.T) {
	parse := func(zones int) time.Duration {
		yaml := "z: &z {name: 'a b', limits: [0r/s, {spec: 1r/s, name: x}], shadow: fals, key: []}\nzones: [" + strings.Repeat("*z, ", zones) + "]\n"
		start := time.Now()
		_, err := Parse("c.yaml", []byte(yaml))
		if err == nil || !strings.Contains(err.Error(), "more problems not shown") {
			t.Fatalf("got %v, want many problems", err)
		}
		return time.Since(start)
	}
	// The fastest of three runs of each size: a machine busy with other
	// work stretches single runs (this failed once at load 20), never the
	// fastest of several; quadratic work stretches all of them.
	small := min(parse(1500), parse(1500), parse(1500))
	if big := min(parse(15000), parse(15000), parse(15000)); big > 40*small+time.Second {
		t.Errorf("Parse took %v for 15,000 zones, %v for 1,500: not linear", big, small)
	}
}

// TestTop checks the top section and the zones' show_keys.
func TestTop(t *testing.T) {
	c, err := Parse("c.yaml", []byte("zones: [{name: a, limits: 1r/s, show_keys: true}, {name: b, limits: 1r/s}]\ntop: {period: 30s, sample: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Zones[0].ShowKeys || c.Zones[1].ShowKeys || c.Top.Disabled || c.Top.Period != 30*time.Second || c.Top.Sample != 1 {
		t.Errorf("got zones %+v, top %+v", c.Zones, c.Top)
	}
	if c, err = Parse("c.yaml", []byte("zones: [{name: a, limits: 1r/s}]\n")); err != nil || c.Top.Period != DefaultTopPeriod || c.Top.Sample != DefaultTopSample {
		t.Errorf("defaults: %+v, %v", c.Top, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"top: {period: 1s}", "top.period: 1s: want between 4s and 1h"},
		{"top: {sample: 2000}", "top.sample: 2000: want at most 1024"},
		{"top: {enabled: maybe}", "top.enabled"},
	} {
		_, err := Parse("c.yaml", []byte("zones: [{name: a, limits: 1r/s}]\n"+tc.yaml+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
	if c, err = Parse("c.yaml", []byte("zones: [{name: a, limits: 1r/s}]\ntop: {enabled: false}\n")); err != nil || !c.Top.Disabled {
		t.Errorf("enabled: false: %+v, %v", c.Top, err)
	}
}

// TestProblemTextExact: an error from package sluice
// or redisstore becomes a problem's text through the typed
// *sluice.InvalidError (its Where, Field and Reason), never by cutting its
// prefix out: the whole message, exactly, names the input once.
func TestProblemTextExact(t *testing.T) {
	const zone = "zones:\n  - name: a\n    limits: 1r/s\n"
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"limit", "zones:\n  - name: a\n    limits: [1r/1500ns]\n",
			`c.yaml:3: zones[0].limits[0]: limit "1r/1500ns": window must be a whole number of microseconds, got 1.5µs (want <rate>r/<period>, such as 100r/s, 10r/m or 20r/30s)`},
		{"limits element", "zones:\n  - name: a\n    limits: 1r/s, 0r/m\n",
			`c.yaml:3: zones[0].limits: limits "1r/s, 0r/m": element 2: limit " 0r/m": rate must be > 0 (want <rate>r/<period>, such as 100r/s, 10r/m or 20r/30s)`},
		{"algorithm", zone + "    algorithm: leaky\n",
			`c.yaml:4: zones[0].algorithm: unknown algorithm "leaky" (want one of sliding-window, buckets, log, decay, gcra)`},
		{"redis url", zone + "store: {url: 'redis://u:hunter2@x:1?frob=1'}\n",
			`c.yaml:4: store.url: redis URL "redis://u:xxxxx@x:1?frob=1": unknown parameter "frob" (known: sentinel_username, sentinel_password) (want redis://[user:password@]host:port[/db], rediss://..., redis-sentinel://host:port,.../master[/db] or redis-cluster://host:port,...)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestSameStateAsLibrary: a zone refuses two limits
// as sharing their counters exactly when the library (sluice.Check.Validate,
// through internal/ident) calls two hits of them one state.
func TestSameStateAsLibrary(t *testing.T) {
	specs := []string{
		"{spec: 60r/m}", "{spec: 30r/m}", "{spec: 60r/h}", "{spec: 60r/m, algorithm: log}",
		"{spec: 60r/m, algorithm: buckets}", "{spec: 60r/m, algorithm: buckets, resolution: 6s}",
		"{spec: 60r/m, algorithm: buckets, resolution: 10s}", "{spec: 60r/m, algorithm: gcra}",
		"{spec: 60r/m, algorithm: decay}", "{spec: 60r/60s, algorithm: sliding-window}",
	}
	for i, a := range specs {
		for _, b := range specs[i+1:] {
			c, err := Parse("c.yaml", []byte("zones:\n  - name: z\n    limits: ["+a+"]\n"))
			if err != nil {
				t.Fatal(err)
			}
			la := c.Zones[0].Limits[0]
			c, err = Parse("c.yaml", []byte("zones:\n  - name: z\n    limits: ["+b+"]\n"))
			if err != nil {
				t.Fatal(err)
			}
			lb := c.Zones[0].Limits[0]
			err = sluice.Check{Cost: 1, Hits: []sluice.Hit{{Zone: "z", Key: "k", Limit: la}, {Zone: "z", Key: "k", Limit: lb}}}.Validate()
			library := err != nil && strings.Contains(err.Error(), "share state")
			_, err = Parse("c.yaml", []byte("zones:\n  - name: z\n    limits: ["+a+", "+b+"]\n"))
			cfg := err != nil && strings.Contains(err.Error(), "would share its counters")
			if cfg != library {
				t.Errorf("%s and %s: config refuses them as one state: %v, the library: %v", a, b, cfg, library)
			}
		}
	}
}
