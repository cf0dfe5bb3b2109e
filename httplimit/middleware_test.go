package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
)

// clock is a settable clock for the store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newStore returns a memory store on a clock aligned to a window start.
func newStore(t *testing.T) (*memstore.Store, *clock) {
	t.Helper()
	clk := &clock{t: time.Unix(1_700_000_040, 0)} // a whole minute
	s, err := memstore.New(memstore.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

// upstream is the handler behind the middleware; it counts what reaches it.
type upstream struct{ hits atomic.Int64 }

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.hits.Add(1)
	io.WriteString(w, "hello")
}

func serve(t *testing.T, limiter sluice.Limiter, limits string, opts httplimit.Options) (*httptest.Server, *upstream) {
	t.Helper()
	ls, err := sluice.ParseLimits(limits)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(limiter, ls, opts)
	if err != nil {
		t.Fatal(err)
	}
	up := &upstream{}
	srv := httptest.NewServer(mw.Wrap(up))
	t.Cleanup(srv.Close)
	return srv, up
}

func get(t *testing.T, url string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytesReader(body))
	return res
}

func TestMiddlewareLimitsPerKey(t *testing.T) {
	store, clk := newStore(t)
	srv, up := serve(t, store, "3r/m", httplimit.Options{Key: httplimit.Header("X-Api-Key")})

	for i := range 3 {
		res := get(t, srv.URL, "X-Api-Key", "alice")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200", i+1, res.StatusCode)
		}
		if got, want := res.Header.Get("RateLimit"), fmt.Sprintf(`"3r/m";r=%d;t=120`, 2-i); got != want {
			t.Errorf("request %d: RateLimit %q, want %q", i+1, got, want)
		}
		if got, want := res.Header.Get("RateLimit-Policy"), `"3r/m";q=3;w=60`; got != want {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, want)
		}
	}
	clk.Add(15 * time.Second)
	res := get(t, srv.URL, "X-Api-Key", "alice")
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("4th request: status %d, want 429", res.StatusCode)
	}
	// sliding-window: at 60 s the three become the previous window, and
	// 3·(60-e)/60 + 1 <= 3 needs e >= 20: 45 s + 20 s from now.
	if got := res.Header.Get("Retry-After"); got != "65" {
		t.Errorf("Retry-After %q, want 65", got)
	}
	if got, want := res.Header.Get("RateLimit"), `"3r/m";r=0;t=65`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	var p struct {
		Type     string   `json:"type"`
		Status   int      `json:"status"`
		Violated []string `json:"violated-policies"`
	}
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.Type != httplimit.QuotaExceeded || p.Status != 429 || len(p.Violated) != 1 || p.Violated[0] != "3r/m" {
		t.Errorf("problem %+v", p)
	}
	if got := up.hits.Load(); got != 3 {
		t.Errorf("upstream saw %d requests, want 3", got)
	}
	// Another key has its own quota.
	if res := get(t, srv.URL, "X-Api-Key", "bob"); res.StatusCode != http.StatusOK {
		t.Errorf("other key: status %d, want 200", res.StatusCode)
	}
	// After Retry-After, alice passes again.
	clk.Add(65 * time.Second)
	if res := get(t, srv.URL, "X-Api-Key", "alice"); res.StatusCode != http.StatusOK {
		t.Errorf("after Retry-After: status %d, want 200", res.StatusCode)
	}
}

// Concurrent requests through a real listener: exactly Rate pass.
func TestMiddlewareConcurrentExact(t *testing.T) {
	store, _ := newStore(t)
	srv, up := serve(t, store, "25r/h", httplimit.Options{})
	var wg sync.WaitGroup
	var ok, denied atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 10 {
				res := get(t, srv.URL)
				switch res.StatusCode {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					denied.Add(1)
				default:
					t.Errorf("status %d", res.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 25 || denied.Load() != 55 || up.hits.Load() != 25 {
		t.Errorf("allowed %d, denied %d, upstream %d; want 25, 55, 25", ok.Load(), denied.Load(), up.hits.Load())
	}
}

// failing is a limiter that cannot decide.
type failing struct{ err error }

func (f failing) Check(context.Context, sluice.Check, *sluice.Decision) error { return f.err }
func (f failing) Reset(context.Context, sluice.Check) error                   { return f.err }

func TestMiddlewareErrors(t *testing.T) {
	store, _ := newStore(t)
	down := failing{fmt.Errorf("teststore: check: %w", sluice.ErrUnavailable)}
	tests := []struct {
		name    string
		limiter sluice.Limiter
		opts    httplimit.Options
		header  []string
		want    int
	}{
		{"store unavailable", down, httplimit.Options{}, nil, http.StatusServiceUnavailable},
		{"missing key", store, httplimit.Options{Key: httplimit.Header("X-Api-Key")}, nil, http.StatusBadRequest},
		{"custom error handler", down, httplimit.Options{OnError: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, sluice.ErrUnavailable) {
				t.Errorf("OnError got %v", err)
			}
			w.WriteHeader(http.StatusTeapot)
		}}, nil, http.StatusTeapot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, up := serve(t, tt.limiter, "1r/s", tt.opts)
			res := get(t, srv.URL, tt.header...)
			if res.StatusCode != tt.want {
				t.Errorf("status %d, want %d", res.StatusCode, tt.want)
			}
			if tt.want != http.StatusTeapot && res.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("Content-Type %q", res.Header.Get("Content-Type"))
			}
			if up.hits.Load() != 0 {
				t.Error("the request reached the upstream")
			}
		})
	}
}

func TestMiddlewareOptions(t *testing.T) {
	store, _ := newStore(t)
	srv, _ := serve(t, store, "1r/m", httplimit.Options{DenyStatus: http.StatusForbidden, OmitAllowedFields: true, Zone: "z"})
	res := get(t, srv.URL)
	if res.StatusCode != http.StatusOK || res.Header.Get("RateLimit") != "" || res.Header.Get("RateLimit-Policy") != "" {
		t.Errorf("allowed: status %d, fields %v; want 200 without RateLimit fields", res.StatusCode, res.Header)
	}
	res = get(t, srv.URL)
	if res.StatusCode != http.StatusForbidden || res.Header.Get("RateLimit") == "" || res.Header.Get("Retry-After") == "" {
		t.Errorf("denied: status %d, fields %v; want 403 with fields", res.StatusCode, res.Header)
	}
	// Shadow limits are decided but never deny and never appear in fields.
	up := &upstream{}
	ls := []sluice.Limit{{Rate: 1, Window: time.Minute, Shadow: true}, {Name: "real", Rate: 100, Window: time.Hour}}
	mw, err := httplimit.New(store, ls, httplimit.Options{Zone: "shadow"})
	if err != nil {
		t.Fatal(err)
	}
	shadowSrv := httptest.NewServer(mw.Wrap(up))
	defer shadowSrv.Close()
	for range 3 {
		res := get(t, shadowSrv.URL)
		if res.StatusCode != http.StatusOK || res.Header.Get("RateLimit-Policy") != `"real";q=100;w=3600` {
			t.Errorf("shadow: status %d, policy %q", res.StatusCode, res.Header.Get("RateLimit-Policy"))
		}
	}
}

func TestNewValidates(t *testing.T) {
	store, _ := newStore(t)
	ten := sluice.Limit{Rate: 10, Window: time.Second}
	tests := []struct {
		name   string
		limits []sluice.Limit
		opts   httplimit.Options
	}{
		{"no limits", nil, httplimit.Options{}},
		{"bad limit", []sluice.Limit{{Rate: 0, Window: time.Second}}, httplimit.Options{}},
		{"shared state", []sluice.Limit{ten, {Rate: 20, Window: time.Second}}, httplimit.Options{}},
		{"negative cost", []sluice.Limit{ten}, httplimit.Options{Cost: -1}},
		{"cost above rate", []sluice.Limit{ten}, httplimit.Options{Cost: 11}},
		{"deny status", []sluice.Limit{ten}, httplimit.Options{DenyStatus: 200}},
		{"name a header cannot carry", []sluice.Limit{{Name: "minüte", Rate: 10, Window: time.Minute}}, httplimit.Options{}},
	}
	for _, tt := range tests {
		if _, err := httplimit.New(store, tt.limits, tt.opts); !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("%s: got %v, want an error wrapping ErrInvalid", tt.name, err)
		}
	}
	if _, err := httplimit.New(nil, []sluice.Limit{ten}, httplimit.Options{}); err == nil {
		t.Error("nil limiter: no error")
	}
}

// allowAll decides without allocating, to measure the middleware alone.
type allowAll struct{}

func (allowAll) Check(_ context.Context, c sluice.Check, d *sluice.Decision) error {
	d.Prepare(len(c.Hits))
	for i := range d.Hits {
		d.Hits[i] = sluice.HitResult{Allowed: true, Used: 1, Remaining: c.Hits[i].Limit.Rate - 1, ResetAfter: time.Second}
	}
	d.Conclude(sluice.FromStore)
	return nil
}
func (allowAll) Reset(context.Context, sluice.Check) error { return nil }

// discard is a reusable ResponseWriter.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

func TestAllowedAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	mw, err := httplimit.New(allowAll{}, []sluice.Limit{{Rate: 100, Window: time.Second}}, httplimit.Options{Key: httplimit.Header("K")})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("K", "key")
	w := &discard{h: http.Header{}}
	allocs := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) })
	// The RateLimit value and its one-element slice.
	if allocs > 2 {
		t.Errorf("%.1f allocations per allowed request, want <= 2", allocs)
	}
}

func BenchmarkMiddleware(b *testing.B) {
	for _, name := range []string{"allow-all", "memstore"} {
		b.Run(name, func(b *testing.B) {
			var limiter sluice.Limiter = allowAll{}
			if name == "memstore" {
				s, err := memstore.New(memstore.Options{})
				if err != nil {
					b.Fatal(err)
				}
				limiter = s
			}
			mw, err := httplimit.New(limiter, []sluice.Limit{{Rate: sluice.MaxRate, Window: time.Second}}, httplimit.Options{Key: httplimit.Header("K")})
			if err != nil {
				b.Fatal(err)
			}
			h := mw.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Header.Set("K", "key"+strconv.Itoa(int(time.Now().UnixNano()%1000)))
				w := &discard{h: http.Header{}}
				for pb.Next() {
					h.ServeHTTP(w, r)
				}
			})
		})
	}
}

func bytesReader(b []byte) io.Reader { return &sliceReader{b: b} }

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
