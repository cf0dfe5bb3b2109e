package redistest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissingBinary runs itself in a child process looking for a binary
// that does not exist: with CI=true the child must fail, otherwise skip.
func TestMissingBinary(t *testing.T) {
	if os.Getenv("REDISTEST_CHILD") == "1" {
		Binary(t, "sluice-no-such-redis-server")
		t.Fatal("Binary returned for a missing binary")
	}
	for _, ci := range []string{"true", ""} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingBinary$", "-test.v")
		cmd.Env = append(os.Environ(), "REDISTEST_CHILD=1", "CI="+ci)
		out, err := cmd.CombinedOutput()
		text := string(out)
		switch {
		case ci == "true" && (err == nil || !strings.Contains(text, "--- FAIL") || !strings.Contains(text, "CI=true")):
			t.Errorf("CI=true: want a failure naming CI, got err %v:\n%s", err, text)
		case ci == "" && (err != nil || !strings.Contains(text, "--- SKIP")):
			t.Errorf("CI unset: want a skip, got err %v:\n%s", err, text)
		}
	}
}
