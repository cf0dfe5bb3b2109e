package nginxtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/nginxtest"
	"github.com/sluicehq/sluice/internal/server"
)

// exampleConf is the documented snippet; the test runs it as written,
// with only the addresses replaced.
const exampleConf = "../../examples/nginx.conf"

// sluiceConf is the server the snippet talks to: the zone it names,
// keyed by the client address.
const sluiceConf = `listeners:
  - addr: 127.0.0.1:0
    serve: api
zones:
  - name: per-ip
    limits: [3r/h]
    key: client-address
`

// startSluice runs the real sluice server in-process and returns its API
// address.
func startSluice(t *testing.T) string {
	t.Helper()
	cfg, err := config.Parse("sluice.yaml", []byte(sluiceConf))
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
			t.Errorf("sluice: %v", err)
		}
	})
	return srv.Addrs()[0].Addr
}

// app is the application behind nginx: it counts the requests that reach
// it, and answers /forbidden with its own 403.
type app struct{ hits atomic.Int64 }

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.hits.Add(1)
	if r.URL.Path == "/forbidden" {
		http.Error(w, "the app says no", http.StatusForbidden)
		return
	}
	fmt.Fprintf(w, "app: %s", r.URL.Path)
}

// startNginx runs examples/nginx.conf, edited by edit, in front of
// upstream with sluiceAddr as the auth target.
func startNginx(t *testing.T, sluiceAddr, upstream string, edit func(string) string) *nginxtest.Nginx {
	t.Helper()
	raw, err := os.ReadFile(exampleConf)
	if err != nil {
		t.Fatal(err)
	}
	return nginxtest.Start(t, func(listen string) string {
		conf := string(raw)
		for old, repl := range map[string]string{
			"server 127.0.0.1:8080;": "server " + sluiceAddr + ";",
			"server 127.0.0.1:9000;": "server " + upstream + ";",
			"listen 8000;":           "listen " + listen + ";",
		} {
			if !strings.Contains(conf, old) {
				t.Fatalf("%s no longer contains %q", exampleConf, old)
			}
			conf = strings.Replace(conf, old, repl, 1)
		}
		if edit != nil {
			conf = edit(conf)
		}
		return conf
	})
}

// clientFrom returns an HTTP client whose connections come from the
// loopback address ip, so that nginx sees a different client per address.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, c *http.Client, url string) answer {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{res.StatusCode, res.Header, string(body)}
}

func TestNginxAuthRequest(t *testing.T) {
	up := &app{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	n := startNginx(t, startSluice(t), upstream.Listener.Addr().String(), nil)
	alice, bob, carol := clientFrom("127.0.0.2"), clientFrom("127.0.0.3"), clientFrom("127.0.0.4")

	// Under the limit: the application answers, with the RateLimit fields.
	for i := range 3 {
		a := get(t, alice, n.URL+"/page")
		if a.status != http.StatusOK || a.body != "app: /page" {
			t.Fatalf("request %d: %d %q, want 200 from the app", i+1, a.status, a.body)
		}
		if got, want := a.header.Get("RateLimit"), fmt.Sprintf(`"3r/h";r=%d;t=`, 2-i); !strings.HasPrefix(got, want) {
			t.Errorf("request %d: RateLimit %q, want %s...", i+1, got, want)
		}
		if got := a.header.Get("RateLimit-Policy"); got != `"3r/h";q=3;w=3600` {
			t.Errorf("request %d: RateLimit-Policy %q", i+1, got)
		}
	}
	// Over it: 429 from nginx, with sluice's Retry-After, and the app is
	// not asked.
	a := get(t, alice, n.URL+"/page")
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("4th request: %d %q, want 429", a.status, a.body)
	}
	retry, err := strconv.Atoi(a.header.Get("Retry-After"))
	if err != nil || retry < 1 || retry > 2*3600 {
		t.Errorf("Retry-After %q, want whole seconds in [1, 7200]", a.header.Get("Retry-After"))
	}
	if got, want := a.header.Get("RateLimit"), fmt.Sprintf(`"3r/h";r=0;t=%d`, retry); got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("429 body %q (%s): %v", a.body, a.header.Get("Content-Type"), err)
	}
	if p.Type != httplimit.QuotaExceeded || p.Status != 429 || !strings.Contains(p.Detail, "retry after "+strconv.Itoa(retry)+" s") {
		t.Errorf("problem %+v", p)
	}
	if got := up.hits.Load(); got != 3 {
		t.Errorf("the app saw %d requests, want 3", got)
	}
	// Another client has its own quota: the key is the client address
	// nginx passes in X-Real-IP, not nginx's own.
	if a := get(t, bob, n.URL+"/other"); a.status != http.StatusOK {
		t.Errorf("another client: %d, want 200", a.status)
	}
	// The app's own 403 is passed on, not turned into a 429.
	if a := get(t, carol, n.URL+"/forbidden"); a.status != http.StatusForbidden || !strings.Contains(a.body, "the app says no") {
		t.Errorf("app's 403: got %d %q", a.status, a.body)
	}
}

// With sluice unreachable, the snippet fails closed (500); with its
// commented fail-open lines enabled, requests reach the app.
func TestNginxSluiceUnreachable(t *testing.T) {
	up := &app{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	dead := closedAddr(t)
	closed := startNginx(t, dead, upstream.Listener.Addr().String(), nil)
	if a := get(t, http.DefaultClient, closed.URL+"/"); a.status != http.StatusInternalServerError || up.hits.Load() != 0 {
		t.Errorf("fail closed: %d, app hits %d; want 500, 0", a.status, up.hits.Load())
	}
	open := startNginx(t, dead, upstream.Listener.Addr().String(), uncommentFailOpen)
	if a := get(t, http.DefaultClient, open.URL+"/x"); a.status != http.StatusOK || a.body != "app: /x" {
		t.Errorf("fail open: %d %q; want 200 from the app", a.status, a.body)
	}
}

// uncommentFailOpen enables the snippet's commented fail-open lines.
func uncommentFailOpen(conf string) string {
	line := regexp.MustCompile(`(?m)^(\s*)# (error_page 500 502 504 = @sluice_unreachable;)$`)
	conf = line.ReplaceAllString(conf, "$1$2")
	block := regexp.MustCompile(`(?ms)^    # (location @sluice_unreachable \{.*?)^    # \}`)
	return block.ReplaceAllStringFunc(conf, func(b string) string {
		return regexp.MustCompile(`(?m)^    # ?`).ReplaceAllString(b, "    ")
	})
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
