package config

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/sluicehq/sluice"
)

// zoneDefaults are the zone-level settings its limits inherit, applied
// after the whole zone is read so that field order does not matter.
type zoneDefaults struct {
	algorithm  sluice.Algorithm
	resolution time.Duration
}

func (w *walker) zone(n *yaml.Node, path string, z *Zone) {
	var d zoneDefaults
	var limitPaths []string
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"name": func(v *yaml.Node, p string) { z.Name = w.str(v, p) },
		"limits": func(v *yaml.Node, p string) {
			z.Limits, limitPaths = w.limits(v, p)
		},
		"algorithm": func(v *yaml.Node, p string) { d.algorithm = w.algorithm(v, p) },
		"resolution": func(v *yaml.Node, p string) {
			d.resolution = w.duration(v, p)
		},
		"key":     func(v *yaml.Node, p string) { w.key(v, p, &z.Key) },
		"group":   func(v *yaml.Node, p string) { z.Group = w.str(v, p) },
		"failure": func(v *yaml.Node, p string) { z.Failure = FailurePolicy(w.str(v, p)) },
		"shadow":  func(v *yaml.Node, p string) { z.Shadow = w.boolean(v, p) },
		"mode":    func(v *yaml.Node, p string) { z.Mode = Mode(w.str(v, p)) },
		"sync_interval": func(v *yaml.Node, p string) {
			z.SyncInterval = w.duration(v, p)
		},
		"processes": func(v *yaml.Node, p string) { z.Processes = int(min(w.positive(v, p), 1<<20)) },
		"first_sight": func(v *yaml.Node, p string) {
			z.FirstSight = w.nonNegative(v, p)
		},
		"show_keys": func(v *yaml.Node, p string) { z.ShowKeys = w.boolean(v, p) },
	})
	for i := range z.Limits {
		l := &z.Limits[i]
		if l.Algorithm == "" {
			l.Algorithm = d.algorithm
		}
		if l.Resolution == 0 && l.Algo() == sluice.Buckets {
			l.Resolution = d.resolution
		}
		l.Shadow = l.Shadow || z.Shadow
		w.checkLimit(*l, limitPaths[i])
	}
}

func (w *walker) checkLimit(l sluice.Limit, path string) {
	if w.failed(path) {
		return // its spec or a field is reported
	}
	err := l.Validate()
	if err == nil && !headerSafe(l.Name) {
		err = fmt.Errorf("name %q: use printable ASCII (a RateLimit-Policy field carries it)", l.Name)
	}
	if err != nil {
		w.add(w.line(path), path, "%s", problem(err))
	}
}

func (w *walker) algorithm(n *yaml.Node, path string) sluice.Algorithm {
	a, err := sluice.ParseAlgorithm(w.str(n, path))
	if err != nil {
		w.add(w.line(path), path, "%s", problem(err))
	}
	return a
}

// limits reads "1r/5s, 5r/h", or a list whose items are spec strings or
// mappings. It returns each limit with the path to report it under.
func (w *walker) limits(n *yaml.Node, path string) ([]sluice.Limit, []string) {
	if r := w.node(n, path); r != nil && r.Kind == yaml.ScalarNode && !isNull(r) && r.Value != "" {
		ls, err := sluice.ParseLimits(r.Value)
		if err != nil {
			w.add(r.Line, path, "%s", problem(err))
			return nil, nil
		}
		paths := make([]string, len(ls))
		for i := range paths {
			paths[i] = path
		}
		return ls, paths
	}
	var (
		ls    []sluice.Limit
		paths []string
	)
	w.list(n, path, func(item *yaml.Node, p string) {
		if l, ok := w.limit(item, p); ok {
			ls, paths = append(ls, l), append(paths, p)
		}
	})
	return ls, paths
}

func (w *walker) limit(n *yaml.Node, path string) (sluice.Limit, bool) {
	if r := w.node(n, path); r != nil && r.Kind == yaml.ScalarNode && !isNull(r) && r.Value != "" {
		return w.spec(r.Value, path)
	}
	var (
		l   sluice.Limit
		ok  bool
		set = map[string]bool{}
	)
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"spec": func(v *yaml.Node, p string) {
			name, algo, res, shadow := l.Name, l.Algorithm, l.Resolution, l.Shadow
			set["spec"] = true
			spec := w.str(v, p)
			if spec == "" {
				return // reported
			}
			l, ok = w.spec(spec, p)
			l.Name, l.Algorithm, l.Resolution, l.Shadow = name, algo, res, shadow
		},
		"name":       func(v *yaml.Node, p string) { l.Name = w.str(v, p) },
		"algorithm":  func(v *yaml.Node, p string) { l.Algorithm = w.algorithm(v, p) },
		"resolution": func(v *yaml.Node, p string) { l.Resolution = w.duration(v, p) },
		"shadow":     func(v *yaml.Node, p string) { l.Shadow = w.boolean(v, p) },
	})
	if !set["spec"] && !w.failed(path) {
		w.add(w.line(path), path, "missing spec, such as spec: 100r/m")
	}
	return l, ok
}

func (w *walker) spec(s, path string) (sluice.Limit, bool) {
	l, err := sluice.ParseLimit(s)
	if err != nil {
		w.add(w.line(path), path, "%s", problem(err))
		return l, false
	}
	return l, true
}

// key reads "client-address", a list of parts, or a mapping with from or
// first_of, and trusted_proxies.
func (w *walker) key(n *yaml.Node, path string, k *KeySource) {
	r := w.node(n, path)
	if r == nil || r.Kind != yaml.MappingNode {
		k.Parts = w.keyParts(n, path)
		return
	}
	given := 0
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"from": func(v *yaml.Node, p string) { k.Parts = w.keyParts(v, p); given++ },
		"first_of": func(v *yaml.Node, p string) {
			k.Parts, k.FirstOf = w.keyParts(v, p), true
			given++
		},
		"trusted_proxies": func(v *yaml.Node, p string) { k.TrustedProxies = w.prefixes(v, p) },
	})
	if given > 1 {
		w.add(r.Line, path, "set either from (combine every part) or first_of (the first part present), not both")
	}
}

func (w *walker) keyParts(n *yaml.Node, path string) []KeyPart {
	r := w.node(n, path)
	seq := r != nil && r.Kind == yaml.SequenceNode
	texts := w.strings(n, path)
	parts := make([]KeyPart, 0, len(texts))
	for i, s := range texts {
		p := path
		if seq {
			p = index(path, i)
		}
		if s == "" {
			continue // reported
		}
		part, err := ParseKeyPart(s)
		if err != nil {
			w.add(w.line(p), p, "%v", err)
			continue
		}
		parts = append(parts, part)
	}
	return parts
}

// ParseKeyPart parses one key source: "client-address", "header:NAME",
// "query:NAME" or "cookie:NAME".
func ParseKeyPart(s string) (KeyPart, error) {
	const want = "want client-address, header:NAME, query:NAME or cookie:NAME"
	if s == string(ClientAddress) {
		return KeyPart{Kind: ClientAddress}, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if !ok {
		return KeyPart{}, fmt.Errorf("unknown key source %q (%s)", s, want)
	}
	p := KeyPart{Kind: KeyPartKind(kind), Name: name}
	switch p.Kind {
	case Header:
		if !validToken(name) {
			return KeyPart{}, fmt.Errorf("key source %q: %q is not a valid header name", s, name)
		}
		p.Name = http.CanonicalHeaderKey(name)
	case Cookie:
		if !validToken(name) {
			return KeyPart{}, fmt.Errorf("key source %q: %q is not a valid cookie name", s, name)
		}
	case Query:
		if name == "" {
			return KeyPart{}, fmt.Errorf("key source %q: missing the query argument's name", s)
		}
	default:
		return KeyPart{}, fmt.Errorf("unknown key source %q (%s)", s, want)
	}
	return p, nil
}

// headerSafe reports whether s can be written in a Structured Field
// String as it is: printable ASCII only.
func headerSafe(s string) bool {
	for _, c := range []byte(s) {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// validToken reports whether s is an RFC 9110 token, the syntax of header
// and cookie names.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
