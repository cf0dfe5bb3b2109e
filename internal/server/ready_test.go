package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestReadyWaitsForStore starts a server against a real Redis that is not
// running yet: the server starts, /readyz answers 503 and gRPC health
// NOT_SERVING; once Redis starts, the first check, sent at once, waits
// for the store (within the store timeout) and is decided by it, not by
// the failure policy; then /readyz is 200 and gRPC health SERVING.
func TestReadyWaitsForStore(t *testing.T) {
	r := redistest.Standalone(t)
	r.Kill() // its port stays reserved: Redis starts late, on it
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte("domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A generous timeout: the check waits for the warm-up, which retries
	// the connection at most a second apart.
	ts := start(t, parseConfig(t, `
store: {url: "`+r.URL()+`", timeout: 5s}
listeners: [{addr: "127.0.0.1:0"}, {addr: "127.0.0.1:0", serve: grpc}]
rls: {config_dir: '`+dir+`'}
zones: [{name: z, limits: 2r/h, failure: open}]
`), Options{})
	var grpcAddr string
	for _, a := range ts.Addrs() {
		if a.Role == config.GRPC {
			grpcAddr = a.Addr
		}
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := func() healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
		if err != nil {
			t.Fatalf("gRPC health: %v", err)
		}
		return resp.Status
	}

	if resp, body := get(t, ts.api+"/readyz", nil); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "not ready") {
		t.Errorf("/readyz before Redis runs: %d %s, want 503 not ready", resp.StatusCode, body)
	}
	if st := health(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health before Redis runs: %v, want NOT_SERVING", st)
	}

	r.Restart() // answers PING when it returns
	resp, body := post(t, ts.api+"/v1/check", `{"zone":"z","key":"first"}`)
	var d struct{ Source string }
	json.Unmarshal(body, &d)
	if resp.StatusCode != http.StatusOK || d.Source != "store" {
		t.Errorf("first check after Redis started: %d %s; want 200 decided by the store", resp.StatusCode, body)
	}
	keys, err := r.Do("KEYS", "sluice:z*").AsStrSlice()
	if err != nil || !strings.Contains(strings.Join(keys, " "), "first") {
		t.Errorf("Redis holds no state of the first check: KEYS sluice:z* = %q, %v", keys, err)
	}
	if resp, body := get(t, ts.api+"/readyz", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz after the first check: %d %s, want 200", resp.StatusCode, body)
	}
	if st := health(); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health after the first check: %v, want SERVING", st)
	}
	if logs := ts.logs.String(); !strings.Contains(logs, "store ready") || strings.Contains(logs, "decided without the store") {
		t.Errorf("logs: want \"store ready\" and no check decided without the store:\n%s", logs)
	}
}

// waitReady waits until the server's store is warm, at most 10 s.
func (ts *testServer) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-ts.ready.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("store not warm after 10 s; logs:\n%s", ts.logs.String())
	}
}
