package difftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/server"
)

// installMu serializes the installation within the test binary.
var installMu sync.Mutex

// binaries returns the paths of envoyproxy/ratelimit's service_cmd (the
// server) and config_check_cmd (its rule checker) at Version, building
// them with go install on first use. A build that fails skips the test,
// or fails it when CI is "true".
func binaries(t *testing.T) (service, check string) {
	t.Helper()
	installMu.Lock()
	defer installMu.Unlock()
	dir := os.Getenv("SLUICE_RATELIMIT_BIN_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir = filepath.Join(cache, "sluice", "envoy-ratelimit", Version)
	}
	service, check = filepath.Join(dir, "service_cmd"), filepath.Join(dir, "config_check_cmd")
	if isFile(service) && isFile(check) {
		return service, check
	}
	const mod = "github.com/envoyproxy/ratelimit/src/"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", mod+"service_cmd@"+Version, mod+"config_check_cmd@"+Version)
	cmd.Dir = t.TempDir() // outside sluice's module
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-buildvcs=false")
	t.Logf("installing envoyproxy/ratelimit %s into %s (once; it may take minutes)", Version, dir)
	out, err := cmd.CombinedOutput()
	if err == nil && isFile(service) && isFile(check) {
		return service, check
	}
	msg := fmt.Sprintf("go install of envoyproxy/ratelimit %s failed: %v\n%s", Version, err, tail(string(out), 20))
	if os.Getenv("CI") == "true" {
		t.Fatalf("difftest: %s\nCI=true, so this is a failure, not a skip", msg)
	}
	t.Skipf("difftest: %s", msg)
	return "", ""
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// mode is how both servers are configured.
type mode struct {
	name    string
	headers bool // LIMIT_RESPONSE_HEADERS_ENABLED, rls.response_headers
	shadow  bool // SHADOW_MODE, rls.shadow_mode
}

// endpoint is one server's gRPC client and /json URL.
type endpoint struct {
	client pb.RateLimitServiceClient
	json   string
}

// pair is envoyproxy/ratelimit and sluice serving one rule directory in one
// mode, each on its own Redis.
type pair struct {
	mode             mode
	dir              string // the rule directory both read
	upstream, sluice endpoint
}

// newPair starts both servers on a copy of the rule files.
func newPair(t *testing.T, bin string, m mode, rules map[string][]byte) *pair {
	t.Helper()
	root := t.TempDir()
	p := &pair{mode: m, dir: filepath.Join(root, "ratelimit", "config")}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range rules {
		if err := os.WriteFile(filepath.Join(p.dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p.upstream = startUpstream(t, bin, root, m, redistest.Standalone(t).Addr())
	p.sluice = startSluice(t, p.dir, m, redistest.Standalone(t).URL())
	return p
}

// startUpstream runs envoyproxy/ratelimit on the runtime root (rules in
// root/ratelimit/config) and Redis at addr. STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
// is on: it counts nothing on a request that a descriptor denies, as
// sluice's all-or-nothing check does.
func startUpstream(t *testing.T, bin, root string, m mode, redisAddr string) endpoint {
	t.Helper()
	ports := freePorts(t, 3)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"USE_STATSD=false", "LOG_LEVEL=warn", "LOG_FORMAT=text",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr,
		"RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"HOST=127.0.0.1", "PORT="+strconv.Itoa(ports[0]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(ports[2]),
		"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true",
		"LIMIT_RESPONSE_HEADERS_ENABLED="+strconv.FormatBool(m.headers),
		"SHADOW_MODE="+strconv.FormatBool(m.shadow),
	)
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting envoyproxy/ratelimit: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	base := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/healthcheck")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("envoyproxy/ratelimit exited at start:\n%s", tail(log.String(), 30))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("envoyproxy/ratelimit not healthy within 60 s:\n%s", tail(log.String(), 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return endpoint{client: dial(t, "127.0.0.1:"+strconv.Itoa(ports[1])), json: base + "/json"}
}

// startSluice runs sluice's server as `sluice serve --rls-config-dir dir
// --store-url url` would, in this process, with the options of m. The
// store timeout is long, so that a loaded machine never makes a failure
// policy answer.
func startSluice(t *testing.T, dir string, m mode, url string) endpoint {
	t.Helper()
	yaml := fmt.Sprintf("listeners:\n  - {addr: 127.0.0.1:0, serve: api}\n  - {addr: 127.0.0.1:0, serve: grpc}\n"+
		"rls: {config_dir: %q, response_headers: %t, shadow_mode: %t}\nstore: {url: %q, timeout: 5s}\n", dir, m.headers, m.shadow, url)
	cfg, err := config.Parse("sluice.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), cfg, server.Options{WatchInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("sluice Serve: %v", err)
		}
	})
	var e endpoint
	for _, a := range srv.Addrs() {
		switch a.Role {
		case config.GRPC:
			e.client = dial(t, a.Addr)
		case config.API:
			e.json = "http://" + a.Addr + "/json"
		}
	}
	return e
}

func dial(t *testing.T, addr string) pb.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewRateLimitServiceClient(conn)
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

var _ io.Writer = (*lockedBuffer)(nil)

// TestInstallFailure runs itself in a child process whose go install of
// envoyproxy/ratelimit cannot succeed (no module proxy, an empty module
// cache): with CI=true the child must fail, otherwise skip.
func TestInstallFailure(t *testing.T) {
	if os.Getenv("DIFFTEST_CHILD") == "1" {
		binaries(t)
		t.Fatal("binaries returned without envoyproxy/ratelimit")
	}
	for _, ci := range []string{"true", ""} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInstallFailure$", "-test.v")
		cmd.Env = append(os.Environ(), "DIFFTEST_CHILD=1", "CI="+ci, "SLUICE_RATELIMIT_BIN_DIR="+t.TempDir(),
			"GOPROXY=off", "GOMODCACHE="+t.TempDir(), "GOFLAGS=-modcacherw")
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
