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
}

// TestLoading gives every directory of testdata/load (and an empty one) to
// envoyproxy/ratelimit's config_check_cmd, which loads rules as its server
// does, and to rls.LoadDir, and compares whether each loads.
func TestLoading(t *testing.T) {
	_, check := binaries(t)
	dirs, err := filepath.Glob("testdata/load/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no load cases in testdata/load: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty_dir")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	dirs = append(dirs, empty)
	same := 0
	var names []string
	for _, dir := range dirs {
		name := filepath.Base(dir)
		names = append(names, name)
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
