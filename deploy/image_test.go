package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxImageBytes bounds the image: the stripped static binary and the CA
// bundle.
const maxImageBytes = 35 << 20

const imageTag = "localhost/sluice:deploytest"

// engine is the container engine the tests use: SLUICE_ENGINE, or podman.
func engine(t *testing.T) string {
	t.Helper()
	if e := os.Getenv("SLUICE_ENGINE"); e != "" {
		return tool(t, e)
	}
	return tool(t, "podman")
}

// imageConfig is what the tests read of "podman image inspect".
type imageConfig struct {
	Size   int64
	Config struct {
		User         string
		Entrypoint   []string
		Cmd          []string
		ExposedPorts map[string]struct{}
		Labels       map[string]string
	}
}

// TestImage builds the image with scripts/image, inspects it, and runs
// "sluice version" from the binary copied out of it (this sandbox builds
// images but cannot run containers).
func TestImage(t *testing.T) {
	eng := engine(t)
	cmd := exec.Command(filepath.Join(root, "scripts/image"), imageTag)
	cmd.Env = append(os.Environ(), "SLUICE_ENGINE="+filepath.Base(eng))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image: %v\n%s", err, out)
	}
	defer runErr("", eng, "rmi", imageTag)
	var got []imageConfig
	if err := json.Unmarshal([]byte(run(t, "", eng, "image", "inspect", imageTag)), &got); err != nil || len(got) != 1 {
		t.Fatalf("image inspect: %v (%d images)", err, len(got))
	}
	img := got[0]
	user, _, _ := strings.Cut(img.Config.User, ":")
	if user == "" || user == "0" || user == "root" {
		t.Errorf("user %q: want a non-root numeric user", img.Config.User)
	}
	if want := []string{"/usr/local/bin/sluice"}; !slices.Equal(img.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", img.Config.Entrypoint, want)
	}
	if want := []string{"serve", "--listen", "0.0.0.0:8080"}; !slices.Equal(img.Config.Cmd, want) {
		t.Errorf("cmd %q, want %q", img.Config.Cmd, want)
	}
	for _, p := range []string{"8080/tcp", "8081/tcp", "9090/tcp"} {
		if _, ok := img.Config.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed; exposed: %v", p, img.Config.ExposedPorts)
		}
	}
	if v := img.Config.Labels["org.opencontainers.image.version"]; v == "devel" {
		t.Errorf("version label %q: want the binary's or git's version", v)
	}
	for _, l := range []string{"source", "version", "revision", "licenses"} {
		if img.Config.Labels["org.opencontainers.image."+l] == "" {
			t.Errorf("no label org.opencontainers.image.%s; labels: %v", l, img.Config.Labels)
		}
	}
	if img.Size <= 0 || img.Size > maxImageBytes {
		t.Errorf("image size %d bytes, want at most %d", img.Size, maxImageBytes)
	}
	t.Logf("image %s: %.1f MB, user %s", imageTag, float64(img.Size)/(1<<20), img.Config.User)

	dir := t.TempDir()
	id := strings.TrimSpace(run(t, "", eng, "create", imageTag))
	defer runErr("", eng, "rm", id)
	run(t, "", eng, "cp", id+":/usr/local/bin/sluice", filepath.Join(dir, "sluice"))
	run(t, "", eng, "cp", id+":/etc/ssl/certs/ca-certificates.crt", filepath.Join(dir, "ca.crt"))
	if out := run(t, dir, "./sluice", "version"); !strings.HasPrefix(out, "sluice ") {
		t.Errorf("sluice version from the image printed %q", out)
	}
	if ca, err := os.ReadFile(filepath.Join(dir, "ca.crt")); err != nil || !strings.Contains(string(ca), "BEGIN CERTIFICATE") {
		t.Errorf("the image's CA bundle: %v, %d bytes", err, len(ca))
	}
}
