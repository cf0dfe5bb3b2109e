package openresty

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// rockspec is the module's LuaRocks package description.
const rockspec = "sluice-scm-1.rockspec"

// TestRockspec loads the rockspec with Lua and requires that its modules
// are exactly the files of lib/, each under the name require gives it
// (lib/sluice/keys.lua is sluice.keys), with a path from the repository's
// root, and that it depends on lua-resty-redis.
func TestRockspec(t *testing.T) {
	lua, err := exec.LookPath("lua")
	if err != nil {
		msg := "lua not found: install lua-busted, which brings it (scripts/test does)"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: " + msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, lua, "-e", `
local env = {}
local chunk = assert(loadfile("`+rockspec+`", "t", env))
chunk()
assert(env.package == "sluice", "package is not sluice")
assert(env.build.type == "builtin", "build type is not builtin")
for _, d in ipairs(env.dependencies) do print("dep " .. d) end
for name, path in pairs(env.build.modules) do print("mod " .. name .. " " .. path) end
`).CombinedOutput()
	if err != nil {
		t.Fatalf("lua could not load %s: %v\n%s", rockspec, err, out)
	}
	var got, deps []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if d, ok := strings.CutPrefix(line, "dep "); ok {
			deps = append(deps, d)
		} else if m, ok := strings.CutPrefix(line, "mod "); ok {
			got = append(got, m)
		}
	}
	var want []string
	err = filepath.WalkDir("lib", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".lua") {
			return err
		}
		rel := filepath.ToSlash(path)
		name := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(rel, "lib/"), ".lua"), "/", ".")
		want = append(want, name+" openresty/"+rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s modules:\n%s\nwant (the files of lib/):\n%s", rockspec, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.ContainsFunc(deps, func(d string) bool { return strings.HasPrefix(d, "lua-resty-redis") }) {
		t.Errorf("%s dependencies %q, want lua-resty-redis", rockspec, deps)
	}
}
