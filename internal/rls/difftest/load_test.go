package difftest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/rls"
)

// pinnedLoads are the rule directories of testdata/load that sluice and
// envoyproxy/ratelimit do not both load or both refuse: "sluice loads" or
// "sluice refuses", each a row of docs/envoy.md's "What differs".
var pinnedLoads = map[string]string{
	// envoyproxy/ratelimit's main branch, after the compared version.
	"metadata":               "sluice loads",
	"share_threshold_middle": "sluice loads",
	// sluice's own fields.
	"sluice_fields": "sluice loads",
	// Its violations go only to dynamic metadata, which sluice does not
	// send: read as shadow_mode, the limit would silently stop being
	// enforced.
	"quota_mode": "sluice refuses",
	// The first of the two values would be silently ignored.
	"mapping_key_twice": "sluice refuses",
	// envoyproxy/ratelimit's own fixtures of its main branch.
	"fixture main_metadata.yaml":        "sluice loads",
	"fixture main_share_threshold.yaml": "sluice loads",
}

// TestLoading gives every directory of testdata/load, an empty one and
// each of envoyproxy/ratelimit's own fixtures (testdata/fixtures) alone to
// envoyproxy/ratelimit's config_check_cmd, which loads rules as its server
// does, and to rls.LoadDir, and compares whether each loads.
func TestLoading(t *testing.T) {
	_, check := binaries(t)
	dirs, err := filepath.Glob("testdata/load/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no load cases in testdata/load: %v", err)
	}
	names := make([]string, len(dirs))
	for i, dir := range dirs {
		names[i] = filepath.Base(dir)
	}
	empty := filepath.Join(t.TempDir(), "empty_dir")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	dirs, names = append(dirs, empty), append(names, "empty_dir")
	fixtures, err := filepath.Glob("testdata/fixtures/*.yaml")
	if err != nil || len(fixtures) < 19 {
		t.Fatalf("envoyproxy/ratelimit's fixtures: %d in testdata/fixtures (%v), want its 19 and more", len(fixtures), err)
	}
	for _, f := range fixtures {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		dirs, names = append(dirs, dir), append(names, "fixture "+filepath.Base(f))
	}
	same := 0
	for i, dir := range dirs {
		name := names[i]
		out, upErr := exec.Command(check, "-config_dir", dir).CombinedOutput()
		_, slErr := rls.LoadDir(dir)
		got := ""
		switch {
		case upErr == nil && slErr != nil:
			got = "sluice refuses"
		case upErr != nil && slErr == nil:
			got = "sluice loads"
		default:
			same++
		}
		if want := pinnedLoads[name]; got != want {
			t.Errorf("%s: %q, pinned %q\n  envoyproxy/ratelimit: %v %s\n  sluice: %v", name, got, want, upErr, tail(string(out), 3), slErr)
		}
	}
	for name := range pinnedLoads {
		if !slices.Contains(names, name) {
			t.Errorf("pinned load case %s does not exist", name)
		}
	}
	t.Logf("%d of %d rule directories load or fail alike", same, len(dirs))
}
