package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const unitFile = "examples/systemd/sluice.service"

// TestSystemdUnit verifies the unit with systemd-analyze, its ExecStart
// pointed at the binary built from this checkout (verify checks that the
// program exists). A warning (an unknown or misspelt directive) fails the
// test as an error does.
func TestSystemdUnit(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	unit, err := os.ReadFile(filepath.Join(root, unitFile))
	if err != nil {
		t.Fatal(err)
	}
	text := string(unit)
	for _, want := range []string{
		"DynamicUser=yes", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
		"RestrictAddressFamilies=", "SystemCallFilter=@system-service", "ExecReload=/bin/kill -HUP $MAINPID",
		"ExecStart=/usr/local/bin/sluice serve --config /etc/sluice/sluice.yaml",
	} {
		if !strings.Contains(text, "\n"+want) {
			t.Errorf("%s: no line %q", unitFile, want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.service")
	text = strings.ReplaceAll(text, "/usr/local/bin/sluice", sluiceBin)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runErr(dir, analyze, "verify", path)
	if err != nil || strings.TrimSpace(out+stderr) != "" {
		t.Fatalf("systemd-analyze verify %s: %v\n%s%s", unitFile, err, out, stderr)
	}
}

// TestSystemdUnitBroken checks that the verification above can fail: a
// misspelt directive is reported.
func TestSystemdUnitBroken(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	dir := t.TempDir()
	path := filepath.Join(dir, "broken.service")
	unit := "[Service]\nExecStart=" + sluiceBin + " serve\nProtectSytem=strict\n"
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, _ := runErr(dir, analyze, "verify", path)
	if !strings.Contains(out+stderr, "ProtectSytem") {
		t.Fatalf("systemd-analyze verify did not report the misspelt directive: %q", out+stderr)
	}
}
