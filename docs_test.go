package sluice

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// exported collects, per package name of this module, the exported
// declarations a doc may name: "Name" for package-level functions, types,
// variables and constants, "Type.Name" for methods and struct fields.
func exported(t *testing.T) map[string]map[string]bool {
	t.Helper()
	decls := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		names := decls[f.Name.Name]
		if names == nil {
			names = map[string]bool{}
			decls[f.Name.Name] = names
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					name = recvName(d.Recv.List[0].Type) + "." + name
				}
				names[name] = true
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, f := range st.Fields.List {
								for _, n := range f.Names {
									names[s.Name.Name+"."+n.Name] = true
								}
							}
						}
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									names[s.Name.Name+"."+n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return decls
}

func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// qualified matches pkg.Name or pkg.Type.Name with an exported Name.
var qualified = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?`)

// missing returns the identifiers of this module's packages that text
// names and that are not declared.
func missing(decls map[string]map[string]bool, text string) []string {
	var out []string
	for _, m := range qualified.FindAllStringSubmatch(text, -1) {
		names, ok := decls[m[1]]
		if !ok {
			continue // another module's package: context.Canceled, redis.Ring
		}
		if (m[3] == "" && names[m[2]]) || names[m[2]+"."+m[3]] {
			continue
		}
		if plural, ok := strings.CutSuffix(m[2], "s"); ok && m[3] == "" && names[plural] {
			continue // "sluice.Limiters": the plural of a declared name
		}
		out = append(out, m[0])
	}
	return out
}

// ambiguous are package names this module shares with packages of other
// modules that its docs name too; they are not checked.
var ambiguous = []string{"main", "cli", "server", "config", "sim"}

// TestDocsNameRealIdentifiers: every `pkg.Name` (or `pkg.Type.Name`) in
// backquotes in README.md and docs/*.md, and every pkg.Name in a doc
// comment, whose pkg is a package of this module, is an exported
// declaration of that package (a function, type, variable, constant,
// method or field).
func TestDocsNameRealIdentifiers(t *testing.T) {
	decls := exported(t)
	for _, name := range ambiguous {
		delete(decls, name)
	}
	docs, _ := filepath.Glob("docs/*.md")
	code := regexp.MustCompile("`[^`\n]+`")
	for _, path := range append(docs, "README.md") {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, span := range code.FindAllString(string(data), -1) {
			if bad := missing(decls, span); len(bad) > 0 {
				t.Errorf("%s: %s names %v, which is not declared", path, span, bad)
			}
		}
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, cg := range f.Comments {
			for _, bad := range missing(decls, cg.Text()) {
				t.Errorf("%s: a comment names %s, which is not declared", fset.Position(cg.Pos()), bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, fake := range []string{"sluice.NoSuchError", "redisstore.Options.NoSuchField", "ident.Algo.Nope"} {
		if len(missing(decls, fake)) != 1 {
			t.Errorf("%s passes the check", fake)
		}
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range decls {
			if !yield(k) {
				return
			}
		}
	}); !slices.Contains(got, "sluice") || !slices.Contains(got, "redisstore") {
		t.Fatalf("packages found: %v", got)
	}
}

// TestReadmeFrontDoor: the README stays a page a newcomer reads in five
// minutes (at most 300 lines), and every link from it into docs/bench.md
// names a section that page has, so each headline figure leads to its
// command, machine and spread.
func TestReadmeFrontDoor(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 300 {
		t.Errorf("README.md has %d lines, want at most 300: measurements go to docs/bench.md", n)
	}
	bench, err := os.ReadFile("docs/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, line := range strings.Split(string(bench), "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			sections[anchor(title)] = true
		}
	}
	links := regexp.MustCompile(`\]\(docs/bench\.md#([^)]+)\)`).FindAllStringSubmatch(string(readme), -1)
	if len(links) == 0 {
		t.Fatal("README.md links to no section of docs/bench.md")
	}
	for _, m := range links {
		if !sections[m[1]] {
			t.Errorf("README.md links to docs/bench.md#%s, which is no section of it", m[1])
		}
	}
}

// anchor is the fragment GitHub gives a heading: lower case, spaces as
// hyphens, punctuation other than hyphens and underscores dropped.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(title)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
