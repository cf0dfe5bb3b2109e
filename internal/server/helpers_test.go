package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/wire"
)

// testServer is a Server serving on real loopback listeners.
type testServer struct {
	*Server
	api, proxy string // base URLs, "" when not configured
	logs       *lockedBuffer
	cancel     context.CancelFunc
	done       chan error
}

// parseConfig parses YAML for a test, failing it on error.
func parseConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(t.Name()+".yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// start serves cfg until the test ends; the server is stopped, and must
// stop within 10 s, at cleanup.
func start(t *testing.T, cfg *config.Config, opts Options) *testServer {
	t.Helper()
	logs := new(lockedBuffer)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, cfg, opts)
	if err != nil {
		cancel()
		t.Fatalf("New: %v", err)
	}
	if err := s.Listen(); err != nil {
		cancel()
		t.Fatalf("Listen: %v", err)
	}
	ts := &testServer{Server: s, logs: logs, cancel: cancel, done: make(chan error, 1)}
	for _, a := range s.Addrs() {
		switch a.Role {
		case config.API:
			ts.api = "http://" + a.Addr
		case config.ProxyRole:
			ts.proxy = "http://" + a.Addr
		}
	}
	go func() { ts.done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		if err := ts.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ts
}

// stop cancels Serve and waits for it, at most 10 s.
func (ts *testServer) stop() error {
	ts.cancel()
	select {
	case err := <-ts.done:
		ts.done <- err // a second stop returns the same
		return err
	case <-time.After(10 * time.Second):
		return errors.New("Serve did not return within 10s of cancel")
	}
}

// lockedBuffer is a log destination safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

var client = &http.Client{Timeout: 10 * time.Second}

// post sends body as JSON and returns the response with its body read.
func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// get sends a GET with headers and returns the response with its body.
func get(t *testing.T, url string, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// problem is a decoded application/problem+json body.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
}

// wantProblem checks that resp is a problem+json answer of status whose
// detail contains detail.
func wantProblem(t *testing.T, resp *http.Response, raw []byte, status int, detail string) problem {
	t.Helper()
	var p problem
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d (body %s)", resp.StatusCode, status, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("problem body %q: %v", raw, err)
	}
	if p.Status != status || p.Title == "" {
		t.Errorf("problem %+v: want status %d and a title", p, status)
	}
	if !strings.Contains(p.Detail, detail) {
		t.Errorf("detail %q, want it to contain %q", p.Detail, detail)
	}
	return p
}

// decision is a decoded /v1/check answer.
type decision = wire.Response

func decodeDecision(t *testing.T, raw []byte) decision {
	t.Helper()
	var d decision
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("decision %q: %v", raw, err)
	}
	return d
}

// metricValue scrapes url's /metrics and returns the value of the sample
// line starting with series (such as `sluice_checks_total{result="denied",zone="a"}`),
// or -1 when absent.
func metricValue(t *testing.T, api, series string) float64 {
	t.Helper()
	_, raw := get(t, api+"/metrics", nil)
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			if err := json.Unmarshal([]byte(rest), &v); err != nil {
				t.Fatalf("metric %s: value %q: %v", series, rest, err)
			}
			return v
		}
	}
	return -1
}

func parseConfigBytes(yaml string) (*config.Config, error) {
	return config.Parse("test.yaml", []byte(yaml))
}

func loadConfig(t *testing.T, path string) *config.Config {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
