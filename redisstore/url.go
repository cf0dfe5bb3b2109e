package redisstore

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
)

// connURL is a parsed connection URL; see the package doc for the forms.
type connURL struct {
	tls      bool
	mode     string // "standalone", "sentinel" or "cluster"
	user     string
	password string
	hosts    []string
	master   string // sentinel master name
	db       int
	query    map[string]string
}

var schemes = map[string]struct {
	tls  bool
	mode string
}{
	"redis":           {false, "standalone"},
	"rediss":          {true, "standalone"},
	"redis-sentinel":  {false, "sentinel"},
	"rediss-sentinel": {true, "sentinel"},
	"redis-cluster":   {false, "cluster"},
	"rediss-cluster":  {true, "cluster"},
}

// parseURL parses raw. Errors wrap sluice.ErrInvalid and quote the URL
// with its password replaced by "xxxxx".
func parseURL(raw string) (connURL, error) {
	u, err := parseURLParts(raw)
	if err != nil {
		return connURL{}, &sluice.InvalidError{Field: fmt.Sprintf("redis URL %q", redact(raw)),
			Reason: err.Error() + " (want redis://[user:password@]host:port[/db], rediss://..., redis-sentinel://host:port,.../master[/db] or redis-cluster://host:port,...)"}
	}
	return u, nil
}

// CheckURL reports whether New would accept raw as Options.URL, without
// connecting: it is how a configuration is validated before a server
// starts. The error is a *sluice.InvalidError (it wraps sluice.ErrInvalid)
// and hides the password.
func CheckURL(raw string) error {
	_, err := parseURL(raw)
	return err
}

func parseURLParts(raw string) (connURL, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return connURL{}, fmt.Errorf(`missing "://"`)
	}
	sch, ok := schemes[scheme]
	if !ok {
		return connURL{}, fmt.Errorf("unknown scheme %q", scheme)
	}
	u := connURL{tls: sch.tls, mode: sch.mode, query: map[string]string{}}
	rest, query, _ := strings.Cut(rest, "?")
	if err := u.parseQuery(query); err != nil {
		return connURL{}, err
	}
	authority, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if err := u.parseUserinfo(authority[:at]); err != nil {
			return connURL{}, err
		}
		authority = authority[at+1:]
	}
	if err := u.parseHosts(authority); err != nil {
		return connURL{}, err
	}
	return u, u.parsePath(path)
}

// parseUserinfo reads "user:password", ":password" or "password", each
// part percent-decoded (a password may hold "@" or ":" as %40, %3A).
func (u *connURL) parseUserinfo(info string) error {
	user, pass, hasPass := strings.Cut(info, ":")
	if !hasPass {
		user, pass = "", user // redis://secret@host: a password alone
	}
	var err error
	if u.user, err = url.PathUnescape(user); err != nil {
		return fmt.Errorf("bad escape in the user name")
	}
	if u.password, err = url.PathUnescape(pass); err != nil {
		return fmt.Errorf("bad escape in the password")
	}
	return nil
}

func (u *connURL) parseHosts(authority string) error {
	if authority == "" {
		return fmt.Errorf("no host")
	}
	defaultPort := "6379"
	if u.mode == "sentinel" {
		defaultPort = "26379"
	}
	for _, h := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = strings.Trim(h, "[]"), defaultPort
		}
		if host == "" {
			return fmt.Errorf("empty host in %q", h)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return fmt.Errorf("bad port in %q", h)
		}
		u.hosts = append(u.hosts, net.JoinHostPort(host, port))
	}
	if u.mode == "standalone" && len(u.hosts) > 1 {
		return fmt.Errorf("%d hosts for a standalone server (use redis-cluster:// or redis-sentinel://)", len(u.hosts))
	}
	return nil
}

func (u *connURL) parsePath(path string) error {
	parts := strings.Split(path, "/")
	if path == "" {
		parts = nil
	}
	if u.mode == "sentinel" {
		if len(parts) == 0 || parts[0] == "" {
			return fmt.Errorf("missing master name after the sentinel addresses")
		}
		u.master, parts = parts[0], parts[1:]
	}
	if len(parts) == 0 || parts[0] == "" {
		return nil
	}
	if len(parts) > 1 {
		return fmt.Errorf("unexpected path %q", path)
	}
	db, err := strconv.Atoi(parts[0])
	if err != nil || db < 0 {
		return fmt.Errorf("database %q is not an integer >= 0", parts[0])
	}
	if u.mode == "cluster" && db != 0 {
		return fmt.Errorf("a Redis Cluster has only database 0, got %d", db)
	}
	u.db = db
	return nil
}

func (u *connURL) parseQuery(query string) error {
	if query == "" {
		return nil
	}
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "sentinel_password", "sentinel_username":
			if u.mode != "sentinel" {
				return fmt.Errorf("%s applies to redis-sentinel:// only", k)
			}
			u.query[k] = v
		default:
			return fmt.Errorf("unknown parameter %q (known: sentinel_username, sentinel_password)", k)
		}
	}
	return nil
}

// clusterRefresh is how often a Cluster client made by Dial reads the slot
// map, failed calls or not.
const clusterRefresh = time.Second

// clientOption turns u into rueidis options. tlsConf, when not nil, is
// used for TLS URLs; otherwise the system roots verify the server's name.
func (u connURL) clientOption(tlsConf *tls.Config) rueidis.ClientOption {
	opt := rueidis.ClientOption{
		InitAddress:  u.hosts,
		Username:     u.user,
		Password:     u.password,
		SelectDB:     u.db,
		DisableCache: true,
		// Every connection gets a reader from the start, so a connection
		// the server closed (a restart, a failover, an idle timeout) is
		// seen and replaced before a call is sent on it. Without it,
		// rueidis reads a connection used by one caller at a time only
		// during a call: after a restart, the first call on each of its
		// connections failed with EOF, a check decided fail-open although
		// Redis was back (TestRestartNoStaleConnection).
		AlwaysPipelining: true,
		// In a Cluster, rueidis reads the slot map again after a call
		// fails with an error, not after a timeout: a master that hangs
		// (a lost host) keeps its slots, and their checks keep failing,
		// until its connection's ConnWriteTimeout (10s) closes it. Read
		// every second, the map names the promoted replica within a second
		// of its promotion. (Ignored outside a Cluster.)
		ClusterOption: rueidis.ClusterOption{ShardsRefreshInterval: clusterRefresh},
	}
	if u.tls {
		if tlsConf == nil {
			host, _, _ := net.SplitHostPort(u.hosts[0])
			tlsConf = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
		opt.TLSConfig = tlsConf
	}
	switch u.mode {
	case "sentinel":
		opt.Sentinel = rueidis.SentinelOption{
			MasterSet: u.master, TLSConfig: opt.TLSConfig,
			Username: u.query["sentinel_username"], Password: u.query["sentinel_password"],
		}
	case "standalone":
		// A standalone URL may still name a Cluster node: rueidis then
		// discovers the Cluster, and the Store groups hits by slot.
	}
	return opt
}

// redact hides the password of a URL for error messages.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	authority, tail, hasTail := strings.Cut(rest, "/")
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(authority[:at], ":")
	cred := "xxxxx"
	if hasPass {
		cred = user + ":xxxxx"
	}
	out := scheme + "://" + cred + authority[at:]
	if hasTail {
		out += "/" + tail
	}
	return out
}
