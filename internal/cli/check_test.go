package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/server"
)

// startServer runs the real sluice server in-process on a free port with
// the zones of yaml, and returns its API base URL. Reset is served to
// every client (admin.open).
func startServer(t *testing.T, zones string) string {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte("listeners:\n  - addr: 127.0.0.1:0\n    serve: api\nadmin: {open: true}\n"+zones))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(t.Context(), cfg, server.Options{})
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
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return "http://" + srv.Addrs()[0].Addr
}

const testZones = `zones:
  - name: login
    limits: "3r/h, 100r/d"
    algorithm: log
  - name: trial
    limits: [1r/h]
    shadow: true
`

func TestCheckAndReset(t *testing.T) {
	url := startServer(t, testZones)
	check := func(args ...string) (int, string, string) {
		return run(t, append([]string{"check", "-server", url, "-zone", "login"}, args...)...)
	}
	for i := range 3 {
		code, out, errOut := check("alice")
		if code != 0 || !strings.HasPrefix(out, "allowed (zone login, decided by the store)") {
			t.Fatalf("check %d: exit %d, out %q, err %q", i+1, code, out, errOut)
		}
	}
	code, out, _ := check("alice")
	if code != exitDenied || !regexp.MustCompile(`^denied: retry after (59m59\.9\d*s|1h0m0s) \(zone login`).MatchString(out) || !strings.Contains(out, "3r/h") {
		t.Fatalf("4th check: exit %d, out:\n%s", code, out)
	}
	// A peek (cost 0) spends nothing and always fits, and -json passes the server's answer on.
	code, out, _ = check("-cost", "0", "-json", "bob")
	var d apiDecision
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 0 || !d.Allowed || len(d.Limits) != 2 || d.Limits[0].Remaining != 3 {
		t.Fatalf("peek: exit %d, %+v, %v", code, d, err)
	}
	if code, out, errOut := run(t, "reset", "-server", url, "-zone", "login", "alice"); code != 0 || out != "reset 1 key(s) in zone login\n" {
		t.Fatalf("reset: exit %d, out %q, err %q", code, out, errOut)
	}
	if code, _, _ := check("alice"); code != 0 {
		t.Errorf("check after reset: exit %d, want 0", code)
	}
	// Shadow: allowed, with the note.
	run(t, "check", "-server", url, "-zone", "trial", "carol")
	code, out, _ = run(t, "check", "-server", url, "-zone", "trial", "carol")
	if code != 0 || !strings.Contains(out, "a shadow limit would have denied") {
		t.Errorf("shadow: exit %d, out %q", code, out)
	}
}

func TestCheckErrors(t *testing.T) {
	url := startServer(t, testZones)
	tests := []struct {
		args    []string
		code    int
		wantErr string
	}{
		{[]string{"check", "-server", url, "-zone", "nope", "k"}, 1, "404 Not Found: Unknown zone: no zone named \"nope\""},
		{[]string{"check", "-server", url, "-zone", "login", "-cost", "4", "k"}, 1, "400 Bad Request"},
		{[]string{"reset", "-server", url, "-zone", "nope", "k"}, 1, "Unknown zone"},
		{[]string{"check", "-server", "http://127.0.0.1:1", "k"}, 1, "connection refused"},
		{[]string{"check", "-server", url}, 2, "give at least one key"},
		{[]string{"reset", "-server", "localhost:8080", "k"}, 2, "not an http:// or https:// URL"},
	}
	for _, tt := range tests {
		code, _, errOut := run(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.wantErr) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.code, tt.wantErr)
		}
	}
}

// bench -server drives the real API: with one key under 5r/h, exactly 5
// of 40 checks pass.
func TestBenchServer(t *testing.T) {
	url := startServer(t, "zones:\n  - name: z\n    limits: [5r/h]\n")
	r := benchJSON(t, "-server", url, "-zone", "z", "-keys", "1", "-c", "4", "-n", "40")
	if r.Allowed != 5 || r.Denied != 35 || r.Errors != 0 {
		t.Errorf("allowed %d denied %d errors %d; want 5, 35, 0", r.Allowed, r.Denied, r.Errors)
	}
}

// check and reset with -redis reach a real redis-server directly.
func TestCheckRedis(t *testing.T) {
	rs := redistest.Standalone(t)
	direct := func(cmd string, args ...string) (int, string, string) {
		return run(t, append([]string{cmd, "-redis", rs.URL(), "-zone", "z", "-limit", "2r/h, 10r/d", "-algorithm", "gcra"}, args...)...)
	}
	for i, want := range []int{0, 0, exitDenied} {
		if code, out, errOut := direct("check", "alice"); code != want {
			t.Fatalf("check %d: exit %d, want %d\n%s%s", i+1, code, want, out, errOut)
		}
	}
	code, out, _ := direct("check", "-json", "-cost", "0", "alice")
	var d apiDecision
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 0 || len(d.Limits) != 2 || d.Limits[0].Algorithm != "gcra" || d.Limits[0].Remaining != 0 || d.Limits[1].Remaining != 8 {
		t.Fatalf("peek: exit %d, %s, %v", code, out, err)
	}
	// The state is in Redis, under the default prefix.
	if n, err := rs.Do("DBSIZE").AsInt64(); err != nil || n == 0 {
		t.Errorf("DBSIZE %d, %v: want keys", n, err)
	}
	if code, _, errOut := direct("reset", "alice"); code != 0 {
		t.Fatalf("reset: exit %d: %s", code, errOut)
	}
	if code, _, _ := direct("check", "alice"); code != 0 {
		t.Errorf("check after reset: exit %d, want 0", code)
	}
	// Usage errors.
	for _, args := range [][]string{
		{"check", "-redis", rs.URL(), "k"},                                          // no -limit
		{"check", "-redis", rs.URL(), "-server", "http://x", "-limit", "1r/s", "k"}, // both
		{"check", "-limit", "1r/s", "k"},                                            // -limit without -redis
		{"check", "-redis", rs.URL(), "-limit", "1 per s", "k"},                     // bad limit
	} {
		if code, _, _ := run(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	// An unreachable Redis is an error, not a usage error.
	if code, _, errOut := run(t, "check", "-redis", "redis://127.0.0.1:1", "-limit", "1r/s", "-timeout", "1s", "k"); code != 1 {
		t.Errorf("unreachable: exit %d (%s), want 1", code, errOut)
	}
}

// bench -store with a Redis URL runs the checks on Redis, under its own
// prefix. The store timeout is long so that a loaded machine (the race
// detector, parallel packages) cannot turn a slow reply into an error.
func TestBenchRedis(t *testing.T) {
	rs := redistest.Standalone(t)
	r := benchJSON(t, "-store", rs.URL(), "-store-timeout", "5s", "-limit", "10r/h", "-keys", "5", "-c", "4", "-n", "200")
	if r.Allowed != 50 || r.Denied != 150 || r.Errors != 0 {
		t.Errorf("allowed %d denied %d errors %d; want 50, 150, 0", r.Allowed, r.Denied, r.Errors)
	}
	keys, err := rs.Do("KEYS", "*").AsStrSlice()
	if err != nil || len(keys) == 0 {
		t.Fatalf("KEYS: %v, %v", keys, err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, benchPrefix) {
			t.Errorf("key %q outside the bench prefix", k)
		}
	}
}
