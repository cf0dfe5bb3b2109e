package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
)

// run runs the sluice command in-process and returns its exit code and
// output.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	code := Main(context.Background(), args, env)
	return code, stdout.String(), stderr.String()
}

func benchJSON(t *testing.T, args ...string) benchResult {
	t.Helper()
	code, out, errOut := run(t, append([]string{"bench", "-json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, errOut)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	return r
}

func TestBenchStore(t *testing.T) {
	// 10 keys of 10 per hour: exactly 100 of 1000 checks pass.
	r := benchJSON(t, "-store", "memory", "-limit", "10r/h", "-algorithm", "log", "-keys", "10", "-c", "4", "-n", "1000")
	if r.Checks != 1000 || r.Allowed != 100 || r.Denied != 900 || r.Errors != 0 {
		t.Errorf("decisions %d allowed %d denied %d errors %d; want 1000, 100, 900, 0", r.Checks, r.Allowed, r.Denied, r.Errors)
	}
	if r.Concurrency != 4 || r.PerSecond <= 0 || r.Latency.P50 <= 0 || r.Latency.P50 > r.Latency.P999 || r.Latency.P999 > r.Latency.Max {
		t.Errorf("result %+v", r)
	}
	if !strings.Contains(r.Target, "log 10r/h") {
		t.Errorf("target %q", r.Target)
	}
}

func TestBenchHotKey(t *testing.T) {
	// Every check on one key: only its 5 pass.
	r := benchJSON(t, "-limit", "5r/h", "-keys", "1000", "-hot", "1", "-c", "2", "-n", "200")
	if r.Allowed != 5 || r.Denied != 195 {
		t.Errorf("allowed %d denied %d; want 5, 195", r.Allowed, r.Denied)
	}
}

// -url against a real listener limited by httplimit: 2xx counts as
// allowed, 429 as denied.
func TestBenchURL(t *testing.T) {
	store, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(store, []sluice.Limit{{Rate: 30, Window: 3600e9}}, httplimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	r := benchJSON(t, "-url", srv.URL+"/x", "-c", "8", "-n", "120")
	if r.Checks != 120 || r.Allowed != 30 || r.Denied != 90 || r.Errors != 0 {
		t.Errorf("decisions %d allowed %d denied %d errors %d; want 120, 30, 90, 0", r.Checks, r.Allowed, r.Denied, r.Errors)
	}
}

// -url with {key}: each request carries a key from the key space.
func TestBenchURLKeys(t *testing.T) {
	store, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(store, []sluice.Limit{{Rate: 30, Window: 3600e9}}, httplimit.Options{Key: httplimit.Query("k")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	// About 100 requests per key: 30 of each pass.
	r := benchJSON(t, "-url", srv.URL+"/x?k={key}", "-keys", "3", "-c", "4", "-n", "300")
	if r.Allowed != 90 || r.Denied != 210 || r.Errors != 0 {
		t.Errorf("allowed %d denied %d errors %d; want 90, 210, 0", r.Allowed, r.Denied, r.Errors)
	}
}

func TestBenchTable(t *testing.T) {
	code, out, errOut := run(t, "bench", "-n", "50", "-c", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"memory store, sliding-window 1000000r/s", "decisions/s", "p99.9", "50"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\r") {
		t.Errorf("progress written to a non-terminal:\n%q", out)
	}
}

func TestBenchErrors(t *testing.T) {
	// A server that fails every request: exit 1 with the first error.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken upstream", http.StatusBadGateway)
	}))
	defer srv.Close()
	code, _, errOut := run(t, "bench", "-url", srv.URL, "-n", "10", "-c", "2")
	if code != 1 || !strings.Contains(errOut, "status 502: broken upstream") {
		t.Errorf("exit %d, stderr %q; want 1 and the status", code, errOut)
	}
	tests := [][]string{
		{"-store", "memory", "-url", "http://x"},
		{"-limit", "10 per minute"},
		{"-algorithm", "fancy"},
		{"-keys", "0"},
		{"-hot", "2"},
		{"-c", "0"},
		{"-url", "ftp://x"},
		{"-store", "cassandra"},
		{"extra"},
	}
	for _, args := range tests {
		if code, _, _ := run(t, append([]string{"bench"}, args...)...); code != 2 {
			t.Errorf("bench %q: exit %d, want 2", args, code)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"memory":                            "memory",
		"redis://127.0.0.1:6379/0":          "redis://127.0.0.1:6379/0",
		"redis://user:s3cret@10.0.0.1:6379": "redis://10.0.0.1:6379",
		"redis-sentinel://:p@w@h:1,h:2/m?sentinel_password=x": "redis-sentinel://h:1,h:2/m",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
