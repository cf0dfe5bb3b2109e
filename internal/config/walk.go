package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"go.yaml.in/yaml/v4"
)

// maxNodes bounds the nodes one parse visits, aliases included, so that a
// small file of nested aliases (a "billion laughs") cannot exhaust memory
// or time.
const maxNodes = 100_000

// walker reads a yaml.Node tree, recording a problem (with its line) for
// every node that does not have the expected shape. Its methods return the
// zero value after recording a problem, so parsing continues and every
// problem is reported at once.
type walker struct {
	errorList
	visited    int
	tooComplex bool
	// lines maps every path visited to its node's line, for problems found
	// after the walk (duplicate names, unknown zones).
	lines map[string]int
}

func newWalker(file string) *walker {
	return &walker{errorList: errorList{file: file}, lines: map[string]int{}}
}

// node follows aliases and counts the visit; nil once the budget is spent.
func (w *walker) node(n *yaml.Node, path string) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
		w.visited++
	}
	w.visited++
	if n == nil {
		return nil
	}
	if w.visited >= maxNodes {
		if !w.tooComplex {
			w.tooComplex = true
			w.add(n.Line, path, "configuration too complex: more than %d nodes after expanding aliases", maxNodes)
		}
		return nil
	}
	w.lines[path] = n.Line
	return n
}

func (w *walker) line(path string) int { return w.lines[path] }

// isNull reports whether n is an explicit or implicit YAML null.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// fields walks a mapping, calling the function registered for each key
// with the value node and its path. Unknown and repeated keys are
// problems.
func (w *walker) fields(n *yaml.Node, path string, fields map[string]func(v *yaml.Node, path string)) {
	if n = w.node(n, path); n == nil {
		return
	}
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		w.add(n.Line, path, "want a mapping of %s, got %s%s", strings.Join(sortedKeys(fields), ", "), describe(n), omitHint(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		f, ok := fields[name]
		switch {
		case k.Kind != yaml.ScalarNode:
			w.add(k.Line, path, "keys must be plain strings, got %s", describe(k))
		case !ok:
			w.add(k.Line, join(path, name), "unknown field %q (%s)", name, suggest(name, sortedKeys(fields)))
		case seen[name]:
			w.add(k.Line, join(path, name), "field %q given twice", name)
		default:
			seen[name] = true
			f(v, join(path, name))
		}
	}
}

// suggest names the known field closest to name when it is a likely typo
// (at most two edits away), and lists every known field otherwise.
func suggest(name string, sortedKnown []string) string {
	known := sortedKnown
	best, bestDist := "", 3
	if len(name) > 64 {
		known = nil // no field name is that long; spare the comparisons
	}
	for _, k := range known {
		if d := editDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return "want one of " + strings.Join(sortedKnown, ", ")
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func describe(n *yaml.Node) string {
	switch {
	case isNull(n):
		return "nothing"
	case n.Kind == yaml.MappingNode && len(n.Content) == 0:
		return "an empty mapping"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode && len(n.Content) == 0:
		return "an empty list"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "an unsupported node"
}

// omitHint tells how to get a default when n is an empty value: an empty
// value never silently means "the default".
func omitHint(n *yaml.Node) string {
	empty := isNull(n) || n.Kind != yaml.ScalarNode && len(n.Content) == 0 || n.Kind == yaml.ScalarNode && n.Value == ""
	if empty {
		return " (omit the field to get its default)"
	}
	return ""
}

// list walks a non-empty sequence, calling f for each item. Nothing and
// an empty list are problems: a list that is given lists something.
func (w *walker) list(n *yaml.Node, path string, f func(item *yaml.Node, path string)) {
	w.walkList(n, path, false, f)
}

func (w *walker) walkList(n *yaml.Node, path string, emptyOK bool, f func(item *yaml.Node, path string)) {
	if n = w.node(n, path); n == nil {
		return
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 && !emptyOK {
		w.add(n.Line, path, "want a list, got %s%s", describe(n), omitHint(n))
		return
	}
	for i, item := range n.Content {
		f(item, index(path, i))
	}
}

// str returns a scalar's text. Nothing and the empty string are problems:
// an empty value never means the default.
func (w *walker) str(n *yaml.Node, path string) string {
	if n = w.node(n, path); n == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode || isNull(n) || n.Value == "" {
		w.add(n.Line, path, "want a string, got %s%s", describe(n), omitHint(n))
		return ""
	}
	return n.Value
}

// strings returns a non-empty list of scalars; a single scalar is a list
// of one.
func (w *walker) strings(n *yaml.Node, path string) []string {
	return w.stringList(n, path, false)
}

// stringsOrNone is strings where an empty list is a value of its own
// ("none"), such as trusted_proxies: [].
func (w *walker) stringsOrNone(n *yaml.Node, path string) []string {
	return w.stringList(n, path, true)
}

func (w *walker) stringList(n *yaml.Node, path string, emptyOK bool) []string {
	if r := w.node(n, path); r != nil && r.Kind == yaml.ScalarNode && !isNull(r) {
		return []string{w.str(r, path)}
	}
	out := []string{}
	w.walkList(n, path, emptyOK, func(item *yaml.Node, path string) {
		out = append(out, w.str(item, path))
	})
	return out
}

// boolean returns true or false, written so: "yes", "on", "1" and
// quoted strings are problems, not booleans.
func (w *walker) boolean(n *yaml.Node, path string) bool {
	if n = w.node(n, path); n == nil {
		return false
	}
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" && n.Value == "true":
		return true
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" && n.Value == "false":
		return false
	}
	w.add(n.Line, path, "want true or false, got %s", describe(n))
	return false
}

// positive returns an integer > 0, written as a YAML integer.
func (w *walker) positive(n *yaml.Node, path string) int64 {
	if n = w.node(n, path); n == nil {
		return 0
	}
	var i int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
		w.add(n.Line, path, "want an integer, got %s%s", describe(n), omitHint(n))
		return 0
	}
	if i <= 0 {
		w.add(n.Line, path, "must be > 0, got %d (omit the field to get its default)", i)
		return 0
	}
	return i
}

// nonNegative returns an integer >= 0, written as a YAML integer, at most
// sluice.MaxRate.
func (w *walker) nonNegative(n *yaml.Node, path string) int64 {
	if n = w.node(n, path); n == nil {
		return 0
	}
	var i int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
		w.add(n.Line, path, "want an integer, got %s%s", describe(n), omitHint(n))
		return 0
	}
	if i < 0 || i > sluice.MaxRate {
		w.add(n.Line, path, "must be between 0 and %d, got %d", int64(sluice.MaxRate), i)
		return 0
	}
	return i
}

// duration returns a positive Go duration such as "50ms" or "2m".
func (w *walker) duration(n *yaml.Node, path string) time.Duration {
	if n = w.node(n, path); n == nil {
		return 0
	}
	if n.Kind != yaml.ScalarNode {
		w.add(n.Line, path, "want a duration such as 50ms or 30s, got %s", describe(n))
		return 0
	}
	d, err := time.ParseDuration(n.Value)
	switch {
	case err != nil:
		w.add(n.Line, path, "want a duration such as 50ms or 30s, got %q", n.Value)
	case d <= 0:
		w.add(n.Line, path, "must be > 0, got %q", n.Value)
	}
	return max(d, 0)
}
