package rls

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v4"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// MaxFileSize is the largest rule file accepted, in bytes.
const MaxFileSize = 4 << 20

// maxDepth bounds the nesting of descriptors.
const maxDepth = 32

// LoadDir reads every *.yaml and *.yml file of dir (not its
// subdirectories, not files whose name starts with '.'), each one domain
// in envoyproxy/ratelimit's format. Every problem of every file is
// reported, each a *config.Error with the file, the line and the path of
// the value. A directory without a rule file has no domains: every
// request is answered OK, as envoyproxy/ratelimit answers it.
func LoadDir(dir string) (*Rules, error) {
	stamp, err := DirStamp(dir)
	if err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	files := map[string][]byte{}
	for _, e := range ents {
		name := e.Name()
		ext := filepath.Ext(name)
		if strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("rls: %w", err)
		}
		files[path] = data
	}
	r, err := Parse(files)
	if r != nil {
		r.Dir, r.stamp = dir, stamp
	}
	return r, err
}

// DirStamp summarizes the names, sizes and modification times of the
// entries of dir, following a symlinked directory (envoyproxy/ratelimit's
// runtime root usually is one): a watcher reloads when it changes.
func DirStamp(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b []byte
	for _, e := range ents { // sorted by name
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return "", err
		}
		b = fmt.Appendf(b, "%s\x00%d\x00%d\x00", e.Name(), fi.Size(), fi.ModTime().UnixNano())
	}
	return string(b), nil
}

// Parse parses rule files, keyed by their names. Two files may not define
// the same domain. Parse does no I/O and is safe for concurrent use.
func Parse(files map[string][]byte) (*Rules, error) {
	r := &Rules{domains: map[string]*Domain{}}
	var errs []error
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		d, err := parseFile(name, files[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev := r.domains[d.Name]; prev != nil {
			errs = append(errs, &config.Error{File: name, Line: d.line, Path: "domain", Problem: fmt.Sprintf("domain %q is also defined in %s", d.Name, prev.File)})
			continue
		}
		r.domains[d.Name] = &d.Domain
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

// parser reads one file, recording every problem with its line.
type parser struct {
	file string
	errs []error
	// descriptors counts the descriptors read, aliases expanded, against
	// maxDescriptors.
	descriptors int
	// merged counts the fields that merge keys added, against maxMerged.
	merged int
}

// maxMerged bounds the fields that merge keys add in one file, so that a
// small file of merges of merges cannot make the parser work without end.
const maxMerged = 100_000

// maxDescriptors bounds the descriptors of one file after expanding YAML
// aliases, so that a small file of nested aliases cannot exhaust memory.
const maxDescriptors = 100_000

func (p *parser) add(n *yaml.Node, path, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errs = append(p.errs, &config.Error{File: p.file, Line: line, Path: path, Problem: fmt.Sprintf(format, args...)})
}

type parsedDomain struct {
	Domain
	line int
}

func parseFile(file string, data []byte) (*parsedDomain, error) {
	p := &parser{file: file}
	if len(data) > MaxFileSize {
		p.add(nil, "", "file is %d bytes, more than %d", len(data), MaxFileSize)
		return nil, errors.Join(p.errs...)
	}
	root, err := decode(data)
	if err != nil {
		line, msg := yamlError(err)
		p.errs = append(p.errs, &config.Error{File: file, Line: line, Problem: msg})
		return nil, errors.Join(p.errs...)
	}
	d := &parsedDomain{Domain: Domain{File: file, Algorithm: sluice.SlidingWindow, Failure: config.FailOpen}}
	if root == nil {
		p.add(nil, "", "the file is empty; want a domain and its descriptors")
		return nil, errors.Join(p.errs...)
	}
	d.line = root.Line
	var descs *yaml.Node
	p.fields(root, "", map[string]func(*yaml.Node, string){
		"domain":      func(v *yaml.Node, path string) { d.Name = p.str(v, path) },
		"descriptors": func(v *yaml.Node, path string) { descs = v },
		"algorithm": func(v *yaml.Node, path string) {
			a, err := sluice.ParseAlgorithm(p.str(v, path))
			if err != nil {
				p.add(v, path, "%s", reason(err))
			}
			d.Algorithm = a
		},
		"failure": func(v *yaml.Node, path string) {
			switch f := config.FailurePolicy(p.str(v, path)); f {
			case config.FailOpen, config.FailClosed, config.FailLocal:
				d.Failure = f
			default:
				p.add(v, path, "unknown failure policy %q (want open, closed or local)", f)
			}
		},
	})
	if d.Name == "" {
		p.add(root, "domain", "missing domain (want domain: <unique name>)")
	}
	if descs != nil {
		d.root = p.level(descs, "descriptors", d.Algorithm, "", 1)
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return d, nil
}

// level reads a list of descriptors.
func (p *parser) level(n *yaml.Node, path string, algo sluice.Algorithm, metric string, depth int) level {
	lv := level{exact: map[string]*rule{}}
	if depth > maxDepth {
		p.add(n, path, "descriptors nested more than %d deep", maxDepth)
		return lv
	}
	if isNull(n) {
		return lv
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n, path, "want a list of descriptors, got %s", describe(n))
		return lv
	}
	lines := map[string]int{}
	for i, item := range n.Content {
		ip := path + "[" + strconv.Itoa(i) + "]"
		r := p.descriptor(deref(item), ip, algo, metric, depth)
		if r == nil {
			continue
		}
		composite := r.key
		if r.value != "" {
			composite += "_" + r.value
		}
		if prev, dup := lines[composite]; dup {
			p.add(item, ip, "duplicate descriptor %q (also at line %d)", composite, prev)
			continue
		}
		lines[composite] = item.Line
		if r.wildcard {
			lv.wildcards = append(lv.wildcards, r)
		} else {
			lv.exact[composite] = r
		}
	}
	return lv
}

func (p *parser) descriptor(n *yaml.Node, path string, algo sluice.Algorithm, metric string, depth int) *rule {
	if p.descriptors++; p.descriptors > maxDescriptors {
		if p.descriptors == maxDescriptors+1 {
			p.add(n, path, "more than %d descriptors after expanding aliases", maxDescriptors)
		}
		return nil
	}
	r := &rule{}
	var rl, children *yaml.Node
	shadow := false
	p.fields(n, path, map[string]func(*yaml.Node, string){
		"key":             func(v *yaml.Node, path string) { r.key = p.str(v, path) },
		"value":           func(v *yaml.Node, path string) { r.value = p.str(v, path) },
		"rate_limit":      func(v *yaml.Node, path string) { rl = v },
		"descriptors":     func(v *yaml.Node, path string) { children = v },
		"shadow_mode":     func(v *yaml.Node, path string) { shadow = p.boolean(v, path) },
		"detailed_metric": func(v *yaml.Node, path string) { r.detailedMetric = p.boolean(v, path) },
		"share_threshold": func(v *yaml.Node, path string) { r.shareThreshold = p.boolean(v, path) },
		"value_to_metric": func(v *yaml.Node, path string) { r.valueToMetric = p.boolean(v, path) },
		// metadata is for RESPONSE_DYNAMIC_METADATA, which sluice does not
		// send: any mapping is read and ignored.
		"metadata": func(v *yaml.Node, path string) {
			if !isNull(v) && v.Kind != yaml.MappingNode {
				p.add(v, path, "want a mapping, got %s", describe(v))
			}
		},
		"quota_mode": func(v *yaml.Node, path string) {
			p.add(v, path, "quota_mode is not supported by sluice: its violations are reported only in dynamic metadata, which sluice does not send (use shadow_mode for a limit that is counted but never denies)")
		},
	})
	if n.Kind != yaml.MappingNode {
		return nil
	}
	if r.key == "" {
		p.add(n, path+".key", "missing key (every descriptor needs a key)")
	}
	if r.wildcard = strings.Contains(r.value, "*"); r.wildcard {
		r.parts = strings.Split(r.value, "*")
	}
	if r.shareThreshold && !r.wildcard {
		p.add(n, path+".share_threshold", "share_threshold needs a wildcard value such as foo* or /api/*/action")
	}
	r.metric = r.key
	if r.value != "" {
		r.metric += "_" + r.value
	}
	if metric != "" {
		r.metric = metric + "." + r.metric
	}
	if rl != nil {
		r.limit = p.rateLimit(rl, path+".rate_limit", algo, shadow)
		if r.limit != nil && r.limit.sl.Name == "" {
			r.limit.sl.Name = r.metric
		}
	}
	if children != nil {
		r.children = p.level(children, path+".descriptors", algo, r.metric, depth+1)
	}
	return r
}

func (p *parser) rateLimit(n *yaml.Node, path string, algo sluice.Algorithm, shadow bool) *limit {
	l := &limit{}
	var unitNode, perUnitNode *yaml.Node
	p.fields(n, path, map[string]func(*yaml.Node, string){
		"unit":              func(v *yaml.Node, path string) { unitNode, l.unit = v, strings.ToLower(p.str(v, path)) },
		"requests_per_unit": func(v *yaml.Node, path string) { perUnitNode, l.perUnit = v, p.uint32(v, path) },
		"unlimited":         func(v *yaml.Node, path string) { l.unlimited = p.boolean(v, path) },
		"name":              func(v *yaml.Node, path string) { l.name = p.str(v, path) },
		"replaces": func(v *yaml.Node, path string) {
			p.list(v, path, func(item *yaml.Node, path string) {
				var name string
				p.fields(item, path, map[string]func(*yaml.Node, string){
					"name": func(v *yaml.Node, path string) { name = p.str(v, path) },
				})
				if name == "" {
					p.add(item, path+".name", "replaces needs the name of the limit it replaces")
				}
				l.replaces = append(l.replaces, name)
			})
		},
	})
	if n.Kind != yaml.MappingNode {
		return nil
	}
	if l.name != "" && slices.Contains(l.replaces, l.name) {
		p.add(n, path+".replaces", "limit %q replaces itself", l.name)
	}
	if l.unlimited {
		if unitNode != nil || perUnitNode != nil {
			p.add(n, path, "an unlimited rate_limit takes no unit or requests_per_unit")
		}
		return l
	}
	unitWindow, ok := units[l.unit]
	switch {
	case unitNode == nil:
		p.add(n, path+".unit", "missing unit (want "+unitNames+")")
	case !ok:
		p.add(unitNode, path+".unit", "unknown unit %q (want "+unitNames+")", l.unit)
	}
	rate, window := scale(l.perUnit, unitWindow)
	l.sl = sluice.Limit{Name: l.name, Rate: rate, Window: window, Algorithm: algo, Shadow: shadow}
	l.current = &pb.RateLimitResponse_RateLimit{Name: l.name, RequestsPerUnit: l.perUnit, Unit: pbUnits[l.unit]}
	if ok && l.perUnit > 0 {
		if err := l.sl.Validate(); err != nil {
			p.add(n, path, "%s", reason(err))
		}
	}
	return l
}

// pbUnits are the protocol's names of the units.
var pbUnits = map[string]pb.RateLimitResponse_RateLimit_Unit{
	"second": pb.RateLimitResponse_RateLimit_SECOND, "minute": pb.RateLimitResponse_RateLimit_MINUTE,
	"hour": pb.RateLimitResponse_RateLimit_HOUR, "day": pb.RateLimitResponse_RateLimit_DAY,
	"week": pb.RateLimitResponse_RateLimit_WEEK, "month": pb.RateLimitResponse_RateLimit_MONTH,
	"year": pb.RateLimitResponse_RateLimit_YEAR,
}

// fields walks a mapping, calling the function registered for each key.
// Unknown and repeated keys are problems: a key given twice would
// silently drop one of its values (envoyproxy/ratelimit keeps the last).
// YAML merge keys (<<: *anchor, or a list of anchors) add the fields of
// the mappings they name that the mapping does not set itself, as YAML
// and envoyproxy/ratelimit's loader read them.
func (p *parser) fields(n *yaml.Node, path string, fields map[string]func(*yaml.Node, string)) {
	n = deref(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, path, "want a mapping, got %s", describe(n))
		return
	}
	seen := map[string]bool{}
	for _, kv := range p.pairs(n, path, 0) {
		k, v := kv[0], kv[1]
		f, ok := fields[k.Value]
		fp := k.Value
		if path != "" {
			fp = path + "." + k.Value
		}
		switch {
		case !ok:
			known := make([]string, 0, len(fields))
			for name := range fields {
				known = append(known, name)
			}
			slices.Sort(known)
			p.add(k, fp, "unknown field %q (want one of %s)", k.Value, strings.Join(known, ", "))
		case seen[k.Value]:
			p.add(k, fp, "field %q given twice", k.Value)
		default:
			seen[k.Value] = true
			f(deref(v), fp)
		}
	}
}

// pairs lists the key and value nodes of mapping n: its own keys, then
// those of the mappings its merge keys name that it does not set itself
// (the first merged mapping that sets a key wins).
func (p *parser) pairs(n *yaml.Node, path string, depth int) [][2]*yaml.Node {
	var own, merged [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!merge" {
			own = append(own, [2]*yaml.Node{k, v})
			continue
		}
		if depth >= maxDepth {
			p.add(k, path, "merge keys nested more than %d deep", maxDepth)
			continue
		}
		v = deref(v)
		srcs := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			srcs = v.Content
		}
		for _, src := range srcs {
			if src = deref(src); src.Kind != yaml.MappingNode {
				p.add(k, path, "a merge key takes a mapping or a list of mappings, got %s", describe(src))
				continue
			}
			if p.merged > maxMerged {
				continue
			}
			add := p.pairs(src, path, depth+1)
			if p.merged += len(add); p.merged > maxMerged {
				p.add(k, path, "merge keys add more than %d fields", maxMerged)
				continue
			}
			merged = append(merged, add...)
		}
	}
	set := map[string]bool{}
	for _, kv := range own {
		set[kv[0].Value] = true
	}
	for _, kv := range merged {
		if !set[kv[0].Value] {
			set[kv[0].Value] = true
			own = append(own, kv)
		}
	}
	return own
}

func (p *parser) list(n *yaml.Node, path string, f func(*yaml.Node, string)) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n, path, "want a list, got %s", describe(n))
		return
	}
	for i, item := range n.Content {
		f(deref(item), path+"["+strconv.Itoa(i)+"]")
	}
}

func (p *parser) str(n *yaml.Node, path string) string {
	if isNull(n) {
		return ""
	}
	if n.Kind != yaml.ScalarNode {
		p.add(n, path, "want a string, got %s", describe(n))
		return ""
	}
	return n.Value
}

// boolean reads a plain (unquoted) YAML boolean, in YAML 1.1's spellings
// as envoyproxy/ratelimit's loader reads them (true, yes, on, y and their
// negations); a quoted "true" is a string and refused, as there.
func (p *parser) boolean(n *yaml.Node, path string) bool {
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
		switch n.Value {
		case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y":
			return true
		case "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N":
			return false
		}
	}
	p.add(n, path, "want true or false, got %s", describe(n))
	return false
}

func (p *parser) uint32(n *yaml.Node, path string) uint32 {
	var u uint32
	if n.Kind != yaml.ScalarNode || n.Decode(&u) != nil {
		p.add(n, path, "want an integer from 0 to %d, got %s", uint32(1<<32-1), describe(n))
	}
	return u
}

// decode parses YAML into a node tree; nil for an empty document. A panic
// of the YAML library is a parse error, never a crash of a reload.
func decode(data []byte) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: malformed document (%v)", r)
		}
	}()
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if err.Error() == "EOF" {
			return nil, nil
		}
		return nil, err
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, nil
	}
	return deref(doc.Content[0]), nil
}

// deref follows aliases, at most a few levels deep.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "an unsupported node"
}

// yamlError returns the line and the message of a YAML syntax error.
func yamlError(err error) (line int, msg string) {
	var le *yaml.LoadError
	if !errors.As(err, &le) {
		return 0, strings.TrimPrefix(err.Error(), "yaml: ")
	}
	msg = le.Message
	if le.ContextMsg != "" {
		msg += " (" + le.ContextMsg + ")"
	}
	return le.Mark.Line, msg
}

// reason is the text of a problem for an error from package sluice: an
// *sluice.InvalidError's Detail (the input at fault and why, without the
// package's generic prefix), any other error's own text.
func reason(err error) string {
	if ie, ok := errors.AsType[*sluice.InvalidError](err); ok {
		return ie.Detail(true)
	}
	return err.Error()
}
