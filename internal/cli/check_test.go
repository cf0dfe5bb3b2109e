package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/server"
)

// startServer runs the real sluice server in-process on a free port with
// the zones of yaml, and returns its API base URL.
func startServer(t *testing.T, zones string) string {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte("listeners:\n  - addr: 127.0.0.1:0\n    serve: api\n"+zones))
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
	// A peek does not spend, and -json passes the server's answer on.
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
