package rls_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/server"
	"github.com/sluicehq/sluice/memstore"
)

// clock is a settable clock for the memory store.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	// An aligned start: every window of a test begins at t = 0.
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// rig is a running sluice serve with a grpc and an api listener, and a
// gRPC client of its rate-limit service.
type rig struct {
	t      *testing.T
	srv    *server.Server
	dir    string
	clock  *clock
	client pb.RateLimitServiceClient
	conn   *grpc.ClientConn
	api    string
	log    *syncBuffer
}

// syncBuffer is a log destination safe for concurrent use.
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

// rigOptions vary a rig.
type rigOptions struct {
	// store is a store URL; empty: the memory store on the rig's clock.
	store string
	// extra is appended to the sluice.yaml.
	extra string
	// watch is the server's WatchInterval; zero: no polling.
	watch time.Duration
	// storeTimeout is store.timeout; zero: the default, 50ms.
	storeTimeout time.Duration
	// shadow sets rls.shadow_mode.
	shadow bool
}

// start writes files (name → content) to a rule directory and starts a
// server on it.
func start(t *testing.T, files map[string]string, o rigOptions) *rig {
	t.Helper()
	r := &rig{t: t, dir: t.TempDir(), clock: newClock(), log: new(syncBuffer)}
	for name, text := range files {
		r.write(name, text)
	}
	yaml := "listeners:\n  - {addr: 127.0.0.1:0, serve: api}\n  - {addr: 127.0.0.1:0, serve: grpc}\n" +
		"rls: {config_dir: " + r.dir + ", response_headers: true, shadow_mode: " + strconv.FormatBool(o.shadow) + "}\n" + o.extra
	if o.store != "" {
		yaml += "store: {url: \"" + o.store + "\", timeout: " + cmp.Or(o.storeTimeout, 50*time.Millisecond).String() + "}\n"
	}
	cfg, err := config.Parse("sluice.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	opts := server.Options{WatchInterval: cmp.Or(o.watch, -1), Logger: slog.New(slog.NewTextHandler(r.log, nil))}
	if o.store == "" {
		ms, err := memstore.New(memstore.Options{Now: r.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		opts.Store = &server.Store{Limiter: ms}
	}
	r.srv, err = server.New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10 s")
		}
	})
	for _, a := range r.srv.Addrs() {
		switch a.Role {
		case config.GRPC:
			r.conn, err = grpc.NewClient(a.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.conn.Close() })
			r.client = pb.NewRateLimitServiceClient(r.conn)
		case config.API:
			r.api = "http://" + a.Addr
		}
	}
	return r
}

func (r *rig) write(name, text string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(text), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// withAddend sets a descriptor's own hits_addend.
func withAddend(d *rlv3.RateLimitDescriptor, n uint64) *rlv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// call sends a request and fails the test on an RPC error.
func (r *rig) call(req *pb.RateLimitRequest) *pb.RateLimitResponse {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.client.ShouldRateLimit(ctx, req)
	if err != nil {
		r.t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	if len(resp.Statuses) != len(req.Descriptors) {
		r.t.Fatalf("got %d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
	}
	return resp
}

// ask sends descriptors to domain.
func (r *rig) ask(domain string, descs ...*rlv3.RateLimitDescriptor) *pb.RateLimitResponse {
	r.t.Helper()
	return r.call(&pb.RateLimitRequest{Domain: domain, Descriptors: descs})
}

// askN sends the same request n times and returns how many were OK.
func (r *rig) askN(n int, domain string, descs ...*rlv3.RateLimitDescriptor) int {
	r.t.Helper()
	ok := 0
	for range n {
		if r.ask(domain, descs...).OverallCode == pb.RateLimitResponse_OK {
			ok++
		}
	}
	return ok
}

const (
	codeOK   = pb.RateLimitResponse_OK
	codeOver = pb.RateLimitResponse_OVER_LIMIT
)

// metrics returns the server's /metrics page.
func (r *rig) metrics() string {
	r.t.Helper()
	resp, err := http.Get(r.api + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// wantMetric fails unless the /metrics page has a line starting with
// prefix.
func (r *rig) wantMetric(prefix string) {
	r.t.Helper()
	for _, line := range strings.Split(r.metrics(), "\n") {
		if strings.HasPrefix(line, prefix) {
			return
		}
	}
	r.t.Errorf("/metrics has no line starting with %s", prefix)
}
