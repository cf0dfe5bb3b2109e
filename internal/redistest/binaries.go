package redistest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// fallbackDirs are searched after PATH: Debian installs the Redis binaries in
// /usr/bin, which a minimal PATH may still lack, and sbin holds them on some
// systems.
var fallbackDirs = []string{"/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}

// Binary returns the path of the named executable (such as "redis-server"),
// found on PATH or in /usr/bin, /usr/sbin, /usr/local/bin, /usr/local/sbin.
// When it is missing, Binary fails the test if the environment variable CI
// is "true" and skips it otherwise.
func Binary(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range fallbackDirs {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	msg := name + " not found on PATH or in /usr/bin, /usr/sbin, /usr/local/bin (install redis-server, redis-tools and redis-sentinel, or run ./scripts/test)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("redistest: %s; CI=true, so this is a failure, not a skip", msg)
	}
	t.Skipf("redistest: %s", msg)
	return ""
}
