package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v4"
)

// MaxFileSize is the largest configuration Parse accepts, in bytes.
const MaxFileSize = 4 << 20

// Load reads and parses the file at path, reads the admin token from
// admin.token_file and the digest secret from top.digest_secret_file,
// and checks that the listeners' TLS files load (a
// relative name is relative to the directory of path).
// Problems name the path as given.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	w := newWalker(path)
	c := w.parse(data)
	if c != nil && c.Admin.TokenFile != "" {
		w.readToken(&c.Admin, filepath.Dir(path))
	}
	if c != nil && c.Top.DigestSecretFile != "" {
		w.readDigestSecret(&c.Top, filepath.Dir(path))
	}
	if c != nil {
		w.loadTLS(c, filepath.Dir(path))
	}
	if err := w.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse parses and validates a YAML configuration. file names it in
// problems. The error, if any, joins one *Error per problem (at most 20),
// each formatted "file:line: path: problem".
//
// Parse does no I/O and is safe for concurrent use.
func Parse(file string, data []byte) (*Config, error) {
	w := newWalker(file)
	c := w.parse(data)
	if err := w.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// parse walks and validates data, recording every problem in w; the
// Config is complete only when w has none.
func (w *walker) parse(data []byte) *Config {
	if len(data) > MaxFileSize {
		w.add(0, "", "file is %d bytes, more than %d", len(data), MaxFileSize)
		return nil
	}
	root, err := decode(data)
	if err != nil {
		line, msg := yamlError(err)
		w.add(line, "", "%s", msg)
		return nil
	}
	if root == nil {
		w.add(0, "", "the file is empty; want at least a zones section")
		return nil
	}
	c := &Config{File: w.file}
	w.config(root, c)
	if !w.tooComplex {
		w.validate(c)
	}
	return c
}

// decode parses YAML into a node tree; nil for an empty document. A
// second document in the file is an error: it would be silently ignored.
// The YAML decoder has panicked on malformed input in the past: a panic is
// a parse error here, never a crash of the server that reloads a file.
func decode(data []byte) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed document (%v)", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, err
	default:
		line := next.Line
		if len(next.Content) > 0 {
			line = next.Content[0].Line
		}
		return nil, &yaml.LoadError{Message: "a second document (after ---): put everything in one", Mark: yaml.Mark{Line: line}}
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, nil
	}
	return doc.Content[0], nil
}

// yamlError returns the line of a YAML syntax error and its message
// without the position, which the caller prints once, in front. The
// context the parser was in, when it started on another line, is named.
func yamlError(err error) (line int, msg string) {
	var le *yaml.LoadError
	if !errors.As(err, &le) {
		return 0, err.Error()
	}
	msg = le.Message
	if le.ContextMsg != "" && le.ContextMark.Line > 0 && le.ContextMark.Line != le.Mark.Line {
		msg = fmt.Sprintf("%s (%s started on line %d)", msg, strings.TrimPrefix(le.ContextMsg, "while "), le.ContextMark.Line)
	} else if le.ContextMsg != "" {
		msg = fmt.Sprintf("%s (%s)", msg, le.ContextMsg)
	}
	return le.Mark.Line, msg
}

func (w *walker) config(n *yaml.Node, c *Config) {
	w.fields(n, "", map[string]func(*yaml.Node, string){
		"store": func(v *yaml.Node, p string) { w.store(v, p, &c.Store) },
		"log":   func(v *yaml.Node, p string) { w.log(v, p, &c.Log) },
		"listeners": func(v *yaml.Node, p string) {
			w.list(v, p, func(item *yaml.Node, p string) {
				var l Listener
				w.listener(item, p, &l)
				c.Listeners = append(c.Listeners, l)
			})
		},
		"trusted_proxies": func(v *yaml.Node, p string) { c.TrustedProxies = w.prefixes(v, p) },
		"zones": func(v *yaml.Node, p string) {
			w.list(v, p, func(item *yaml.Node, p string) {
				var z Zone
				w.zone(item, p, &z)
				c.Zones = append(c.Zones, z)
			})
		},
		"proxy": func(v *yaml.Node, p string) { w.proxy(v, p, &c.Proxy) },
		"admin": func(v *yaml.Node, p string) { w.admin(v, p, &c.Admin) },
		"rls":   func(v *yaml.Node, p string) { w.rls(v, p, &c.RLS) },
		"top":   func(v *yaml.Node, p string) { w.top(v, p, &c.Top) },
	})
}

func (w *walker) store(n *yaml.Node, path string, s *Store) {
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"url": func(v *yaml.Node, p string) { s.URL = w.str(v, p) },
		"sentinel": func(v *yaml.Node, p string) {
			w.fields(v, p, map[string]func(*yaml.Node, string){
				"master": func(v *yaml.Node, p string) { s.SentinelMaster = w.str(v, p) },
				"addrs":  func(v *yaml.Node, p string) { s.SentinelAddrs = w.strings(v, p) },
			})
		},
		"cluster":  func(v *yaml.Node, p string) { s.ClusterSeeds = w.strings(v, p) },
		"password": func(v *yaml.Node, p string) { s.Password = w.str(v, p) },
		"prefix":   func(v *yaml.Node, p string) { s.Prefix = w.str(v, p) },
		"timeout":  func(v *yaml.Node, p string) { s.Timeout = w.duration(v, p) },
		"max_keys": func(v *yaml.Node, p string) { s.MaxKeys = int(min(w.positive(v, p), 1<<40)) },
	})
}

func (w *walker) log(n *yaml.Node, path string, l *Log) {
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"format": func(v *yaml.Node, p string) { l.Format = LogFormat(w.str(v, p)) },
		"level": func(v *yaml.Node, p string) {
			level, err := ParseLevel(w.str(v, p))
			if err != nil {
				w.add(w.line(p), p, "%v", err)
			}
			l.Level = level
		},
	})
}

// ParseLevel parses a log level: debug, info, warn or error (any case).
// The empty string is info.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if s == "" {
		return slog.LevelInfo, nil
	}
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", s)
	}
	return l, nil
}

func (w *walker) listener(n *yaml.Node, path string, l *Listener) {
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"addr":                func(v *yaml.Node, p string) { l.Addr = w.str(v, p) },
		"serve":               func(v *yaml.Node, p string) { l.Serve = Role(w.str(v, p)) },
		"read_header_timeout": func(v *yaml.Node, p string) { l.ReadHeaderTimeout = w.duration(v, p) },
		"read_timeout":        func(v *yaml.Node, p string) { l.ReadTimeout = w.duration(v, p) },
		"write_timeout":       func(v *yaml.Node, p string) { l.WriteTimeout = w.duration(v, p) },
		"idle_timeout":        func(v *yaml.Node, p string) { l.IdleTimeout = w.duration(v, p) },
		"max_body_bytes":      func(v *yaml.Node, p string) { l.MaxBodyBytes = w.positive(v, p) },
		"tls":                 func(v *yaml.Node, p string) { l.TLS = w.tls(v, p) },
	})
}

// prefixes reads a list of CIDRs; an explicit empty list is an empty,
// non-nil slice, so a zone can trust no proxy whatever the global list.
func (w *walker) prefixes(n *yaml.Node, path string) []netip.Prefix {
	out := []netip.Prefix{}
	for i, s := range w.stringsOrNone(n, path) {
		if s == "" {
			continue // reported
		}
		p, err := ParsePrefix(s)
		if err != nil {
			w.add(w.line(index(path, i)), index(path, i), "%v", err)
			continue
		}
		out = append(out, p)
	}
	return out
}

// ParsePrefix parses a CIDR such as "10.0.0.0/8" or a single address,
// which is the prefix of its full length.
func ParsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an IP address", s)
}

func (w *walker) upstream(n *yaml.Node, path string) *url.URL {
	s := w.str(n, path)
	if s == "" {
		return nil // reported
	}
	u, err := ParseUpstream(s)
	if err != nil {
		w.add(w.line(path), path, "%v", err)
	}
	return u
}

// ParseUpstream parses an upstream URL: http or https with a host.
func ParseUpstream(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("upstream %q is not an http:// or https:// URL with a host", s)
	}
	return u, nil
}

func (w *walker) proxy(n *yaml.Node, path string, px *Proxy) {
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"upstream": func(v *yaml.Node, p string) { px.Upstream = w.upstream(v, p) },
		"headers":  func(v *yaml.Node, p string) { px.Headers = HeaderMode(w.str(v, p)) },
		"rules": func(v *yaml.Node, p string) {
			w.list(v, p, func(item *yaml.Node, p string) {
				var r Rule
				w.rule(item, p, &r)
				px.Rules = append(px.Rules, r)
			})
		},
	})
}

func (w *walker) rule(n *yaml.Node, path string, r *Rule) {
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"host":        func(v *yaml.Node, p string) { r.Host = strings.ToLower(w.str(v, p)) },
		"methods":     func(v *yaml.Node, p string) { r.Methods = w.strings(v, p) },
		"path_prefix": func(v *yaml.Node, p string) { r.PathPrefix = w.str(v, p) },
		"zones":       func(v *yaml.Node, p string) { r.Zones = w.stringsOrNone(v, p) },
		"upstream":    func(v *yaml.Node, p string) { r.Upstream = w.upstream(v, p) },
	})
}

func (w *walker) admin(n *yaml.Node, path string, a *Admin) {
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"endpoints": func(v *yaml.Node, p string) {
			for _, e := range w.strings(v, p) {
				a.Endpoints = append(a.Endpoints, Endpoint(e))
			}
		},
		"token_file": func(v *yaml.Node, p string) { a.TokenFile = w.str(v, p) },
		"open":       func(v *yaml.Node, p string) { a.Open = w.boolean(v, p) },
	})
}

// readToken reads a.TokenFile (relative to dir) into a.Token.
func (w *walker) readToken(a *Admin, dir string) {
	const p = "admin.token_file"
	token, err := readSecret(a.TokenFile, dir)
	if err != nil {
		w.add(w.line(p), p, "%v", err)
		return
	}
	a.Token = token
}

// readSecret reads a token or a secret from file (relative to dir): its
// content without a final newline, checked by CheckToken.
func readSecret(file, dir string) (string, error) {
	name := file
	if !filepath.IsAbs(name) {
		name = filepath.Join(dir, name)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	secret := strings.TrimRight(string(data), "\r\n")
	if err := CheckToken(secret); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return secret, nil
}

// MinTokenLen is the shortest admin token accepted, in bytes.
const MinTokenLen = 16

// CheckToken reports whether token can be an admin bearer token: at least
// MinTokenLen bytes of visible ASCII (no spaces), what an Authorization
// header carries intact. The error never contains the token.
func CheckToken(token string) error {
	if len(token) < MinTokenLen {
		return fmt.Errorf("the token is %d bytes, fewer than %d (make one with: head -c 32 /dev/urandom | base64)", len(token), MinTokenLen)
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("the token has a byte at offset %d that is not visible ASCII", i)
		}
	}
	return nil
}
