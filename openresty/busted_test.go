package openresty

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestBusted runs the Lua unit tests of the module's pure parts (spec/,
// with busted on Debian's Lua 5.x; .busted says how): limit specs, keys,
// hash slots and the script protocol, against values printed by the Go
// store. Without busted it skips, and fails with CI=true (scripts/test
// installs lua-busted).
func TestBusted(t *testing.T) {
	bin, err := exec.LookPath("busted")
	if err != nil {
		msg := "busted not found: install lua-busted (scripts/test does)"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: " + msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--output=plainTerminal")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("busted: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(\d+) successes / (\d+) failures / (\d+) errors`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("busted printed no summary:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n == 0 || string(m[2]) != "0" || string(m[3]) != "0" {
		t.Fatalf("busted: %s successes, %s failures, %s errors, want > 0, 0, 0:\n%s", m[1], m[2], m[3], out)
	}
	t.Logf("busted: %s", m[0])
}
