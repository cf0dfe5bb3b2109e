package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/server"
)

// syncBuffer is an output stream safe to read while a command writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// envOf returns a Getenv reading only vars, so the tests do not depend on
// the real environment.
func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// serveInProcess runs "sluice serve args..." through Main until the
// returned stop function is called; stop returns the exit code.
func serveInProcess(t *testing.T, vars map[string]string, args ...string) (stdout, stderr *syncBuffer, stop func() int) {
	t.Helper()
	stdout, stderr = new(syncBuffer), new(syncBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"serve"}, args...), Env{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr, Getenv: envOf(vars)})
	}()
	stopped := false
	var code int
	stop = func() int {
		if stopped {
			return code
		}
		stopped = true
		cancel()
		select {
		case code = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("sluice serve did not stop within 10 s of its context ending")
		}
		return code
	}
	t.Cleanup(func() { stop() })
	return stdout, stderr, stop
}

// waitFor polls out until re matches, for at most 10 s, and returns the
// match.
func waitFor(t *testing.T, out, errOut *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %v in the output within 10 s.\nstdout:\n%s\nstderr:\n%s", re, out, errOut)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var curlRE = regexp.MustCompile(`(?m)^  (curl -i -X POST (http://\S+) -H 'Content-Type: application/json' -d '(.*)')$`)

// TestServeNoFlags runs the README's first command on a free port and
// answers the curl line it prints: verbatim with curl, and the same
// request from Go.
func TestServeNoFlags(t *testing.T) {
	stdout, stderr, stop := serveInProcess(t, nil, "-listen", "127.0.0.1:0")
	m := waitFor(t, stdout, stderr, curlRE)
	line, url, body := m[1], m[2], m[3]
	if !strings.Contains(stdout.String(), `zone "demo" allows 10r/m per key`) {
		t.Errorf("banner does not describe the demo zone:\n%s", stdout)
	}
	// The demo zone allows 10 per minute: ten answers are 200...
	for i := range 10 {
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"allowed":true`) {
			t.Fatalf("request %d: status %d (%s), want 200 allowed", i, resp.StatusCode, raw)
		}
	}
	// ...and the eleventh, the printed line run verbatim, is 429.
	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command("sh", "-c", line).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		if !strings.Contains(string(out), "HTTP/1.1 429") || !strings.Contains(string(out), "Retry-After:") || !strings.Contains(string(out), `"allowed":false`) {
			t.Errorf("%s (the 11th request): want 429 with Retry-After, got\n%s", curl, out)
		}
	} else {
		t.Log("curl is not installed: sending the printed request from Go instead")
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("the 11th request: status %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("exit code %d after cancel, want 0; stderr:\n%s", code, stderr)
	}
}

func TestServeCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("zones:\n  - {name: api, limits: 100r/m}\n"), 0o644)
	os.WriteFile(bad, []byte("zones:\n  - name: api\n    limits: [100r/w]\n"), 0o644)
	for _, tt := range []struct {
		name   string
		vars   map[string]string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"default", nil, nil, 0, "default configuration: valid: memory store, 1 zone(s)", ""},
		{"reset off", nil, nil, 0, "warning: off, answered 403: POST /v1/reset, POST /v1/top/reset", ""},
		{"good file", nil, []string{"-config", good}, 0, "good.yaml: valid: memory store, 1 zone(s), 1 listener(s)", ""},
		{"bad file", nil, []string{"-config", bad}, 1, "", `bad.yaml:3: zones[0].limits[0]: limit "100r/w"`},
		{"file from env", map[string]string{"SLUICE_CONFIG": bad}, nil, 1, "", "bad.yaml:3:"},
		{"missing file", nil, []string{"-config", filepath.Join(dir, "none.yaml")}, 1, "", "no such file"},
		{"bad env", map[string]string{"SLUICE_LOG_LEVEL": "loud"}, nil, 1, "", `log.level: unknown log level "loud"`},
		{"flag wins over env", map[string]string{"SLUICE_LOG_LEVEL": "loud"}, []string{"-log-level", "debug"}, 0, "valid", ""},
		{"bad listen", nil, []string{"-listen", "nowhere"}, 1, "", `listeners[0].addr: "nowhere" is not host:port`},
		{"bad store", map[string]string{"SLUICE_STORE_URL": "mysql://x"}, nil, 1, "", "store.url"},
		{"redis store", nil, []string{"-store-url", "redis-cluster://127.0.0.1:7000,127.0.0.1:7001"}, 0, "valid: cluster store", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(t.Context(), append([]string{"serve", "-check-config"}, tt.args...), Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(tt.vars)})
			if code != tt.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.code, &stderr)
			}
			if !strings.Contains(stdout.String(), tt.stdout) || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stdout %q, stderr %q; want %q and %q", &stdout, &stderr, tt.stdout, tt.stderr)
			}
		})
	}
}

func TestServeListenFromEnvAndConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	os.WriteFile(path, []byte("log: {format: json}\nzones:\n  - {name: api, limits: 2r/m, key: header:X-Api-Key}\n"), 0o644)
	stdout, stderr, stop := serveInProcess(t, map[string]string{"SLUICE_LISTEN": "127.0.0.1:0"}, "-config", path)
	m := waitFor(t, stdout, stderr, curlRE)
	if !strings.Contains(m[3], `"zone":"api"`) {
		t.Errorf("curl line %q does not use the file's first zone", m[1])
	}
	resp, err := http.Post(m[2], "application/json", strings.NewReader(m[3]))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit code %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), `"msg":"listening"`) {
		t.Errorf("want JSON logs on stderr, got:\n%s", stderr)
	}
}

func TestServeListenError(t *testing.T) {
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{"serve", "-listen", ln.Addr().String()}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(nil)})
	if code != 1 || !strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("exit code %d, stderr %q; want 1 and the listen error", code, &stderr)
	}
}

// TestSIGHUPReloads sends the test process a real SIGHUP while
// reloadOnSIGHUP is listening, and waits for the new file to be served.
func TestSIGHUPReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	os.WriteFile(path, []byte("zones: [{name: before, limits: 1r/s}]\n"), 0o644)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(t.Context(), cfg, server.Options{ConfigPath: path, WatchInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	stop := reloadOnSIGHUP(srv) // signal.Notify is in place when it returns
	defer stop()
	os.WriteFile(path, []byte("zones: [{name: after, limits: 1r/s}]\n"), 0o644)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for srv.Config().Zone("after") == nil {
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload the configuration within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCheckConfigFindsWhatServeRefuses: every
// configuration serve refuses before listening, --check-config refuses
// too, with the same problems, each on its own line.
func TestCheckConfigFindsWhatServeRefuses(t *testing.T) {
	const zone = "listeners: [{addr: '127.0.0.1:0'}]\nzones: [{name: a, limits: 1r/s}]\n"
	dir := t.TempDir()
	for _, tt := range []struct{ name, yaml, want string }{
		{"store timeout", zone + "store: {timeout: 1ns}\n", "c.yaml:3: store.timeout: 1ns is shorter than 1ms"},
		{"redis url port", zone + "store: {url: 'redis://127.0.0.1:99999'}\n", `c.yaml:3: store.url: redis URL "redis://127.0.0.1:99999"`},
		{"prefix brace", zone + "store: {url: 'redis://127.0.0.1:1', prefix: 'a{'}\n", `c.yaml:3: store.prefix: "a{" contains a brace`},
		{"token file", zone + "admin: {token_file: missing}\n", "c.yaml:3: admin.token_file: open "},
		{"several", zone + "store: {timeout: 1ns}\nadmin: {token_file: missing, endpoints: [reset, nope]}\n",
			"c.yaml:3: store.timeout: 1ns is shorter than 1ms; no store call can finish in it\nc.yaml:4: admin.endpoints[1]: unknown endpoint \"nope\" (want reset, check or metrics)\nc.yaml:4: admin.token_file: open missing: no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "c.yaml")
			os.WriteFile(path, []byte(tt.yaml), 0o600)
			for _, args := range [][]string{{"serve", "-check-config", "-config", "c.yaml"}, {"serve", "-config", "c.yaml"}} {
				var stdout, stderr bytes.Buffer
				t.Chdir(dir)
				code := Main(t.Context(), args, Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(nil)})
				if code != 1 || !strings.Contains(stderr.String(), "invalid configuration:\n"+tt.want) {
					t.Errorf("%s: exit %d, stderr:\n%s\nwant 1 and:\n%s", strings.Join(args, " "), code, &stderr, tt.want)
				}
			}
		})
	}
}

// TestCheckConfigResetWarning: --check-config says that POST /v1/reset is
// off while nothing protects it, and is silent once a token does.
func TestCheckConfigResetWarning(t *testing.T) {
	for _, tt := range []struct {
		vars map[string]string
		warn bool
	}{{nil, true}, {map[string]string{"SLUICE_ADMIN_TOKEN": "0123456789abcdef0123456789abcdef"}, false}} {
		var stdout, stderr bytes.Buffer
		if code := Main(t.Context(), []string{"serve", "-check-config"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(tt.vars)}); code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, &stderr)
		}
		if got := strings.Contains(stdout.String(), "warning: off, answered 403: POST /v1/reset"); got != tt.warn {
			t.Errorf("token %v: warning printed: %v, want %v; stdout:\n%s", tt.vars != nil, got, tt.warn, &stdout)
		}
	}
}
