package cli

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writeRuleDir writes an envoyproxy/ratelimit config directory, laid out
// as its RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config, and returns the config
// directory.
func writeRuleDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "runtime", "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var grpcBannerRE = regexp.MustCompile(`sluice: serving grpc on grpc://(\S+)`)
var apiBannerRE = regexp.MustCompile(`sluice: serving api on (http://\S+)`)

// TestServeRLSConfigDir runs "sluice serve --rls-config-dir" on an
// envoyproxy/ratelimit directory without a sluice configuration file: it
// serves a grpc listener and envoyproxy/ratelimit's POST /json.
func TestServeRLSConfigDir(t *testing.T) {
	dir := writeRuleDir(t, map[string]string{"config.yaml": "domain: rl\ndescriptors:\n  - key: generic_key\n    value: default\n    rate_limit:\n      unit: minute\n      requests_per_unit: 2\n"})
	stdout, stderr, stop := serveInProcess(t, map[string]string{"SLUICE_RLS_CONFIG_DIR": dir}, "-listen", "127.0.0.1:0", "-grpc-listen", "127.0.0.1:0")
	waitFor(t, stdout, stderr, grpcBannerRE)
	api := waitFor(t, stdout, stderr, apiBannerRE)[1]
	body := `{"domain":"rl","descriptors":[{"entries":[{"key":"generic_key","value":"default"}]}]}`
	var codes []int
	for range 3 {
		resp, err := http.Post(api+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Errorf("POST /json three times: %v, want 200, 200, 429", codes)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit code %d, want 0; stderr:\n%s", code, stderr)
	}
}

func TestServeCheckConfigRLS(t *testing.T) {
	dir := writeRuleDir(t, map[string]string{"bad.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: weekly, requests_per_unit: 1}\n"})
	var out, errOut syncBuffer
	code := Main(t.Context(), []string{"serve", "--check-config", "--rls-config-dir", dir}, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: envOf(nil)})
	if code != 1 || !strings.Contains(errOut.String(), "bad.yaml:4: descriptors[0].rate_limit.unit: unknown unit \"weekly\"") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and the file, line and reason", code, errOut.String())
	}
}

// TestBenchRLS loads a running server's grpc listener and /json with
// "sluice bench -grpc" and "-rls-json" on examples/envoy/config/bench.yaml.
func TestBenchRLS(t *testing.T) {
	bench, err := os.ReadFile("../../examples/envoy/config/bench.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := writeRuleDir(t, map[string]string{"bench.yaml": string(bench)})
	stdout, stderr, _ := serveInProcess(t, nil, "-listen", "127.0.0.1:0", "-grpc-listen", "127.0.0.1:0", "-rls-config-dir", dir)
	grpcAddr := waitFor(t, stdout, stderr, grpcBannerRE)[1]
	api := waitFor(t, stdout, stderr, apiBannerRE)[1]
	for _, args := range [][]string{{"-grpc", grpcAddr}, {"-rls-json", api + "/json"}} {
		var out, errOut syncBuffer
		code := Main(t.Context(), append([]string{"bench", "-n", "200", "-c", "4", "-json"}, args...), Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: envOf(nil)})
		if code != 0 || !strings.Contains(out.String(), `"allowed": 200`) {
			t.Errorf("bench %v: exit %d, want 200 allowed\nstdout:\n%s\nstderr:\n%s", args, code, out.String(), errOut.String())
		}
	}
}
