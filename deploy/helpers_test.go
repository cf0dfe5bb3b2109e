package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's top directory.
const root = ".."

// sluiceBin is the sluice binary TestMain builds from this checkout.
var sluiceBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sluiceBin = filepath.Join(dir, "sluice")
	build := exec.Command("go", "build", "-o", sluiceBin, "./cmd/sluice")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building sluice: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// tool returns the path of a command the tests need, failing the test
// when it is not installed.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed (scripts/test installs it): %v", name, err)
	}
	return p
}

// run runs a command and returns its standard output, failing the test
// with both streams when it exits non-zero.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	out, stderr, err := runErr(dir, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out, stderr)
	}
	return out
}

func runErr(dir, name string, args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}
