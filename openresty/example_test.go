package openresty

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/nginxtest"
	"github.com/sluicehq/sluice/internal/redistest"
)

// startExample runs examples/openresty/nginx.conf against the Redis at
// redisURL, with its ports, paths, upstream and timeout replaced.
func startExample(t *testing.T, redisURL string) *nginx {
	t.Helper()
	raw, err := os.ReadFile("../examples/openresty/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	// The example keeps its pid file and error log out of the system
	// nginx's way; the test puts them in its directory.
	for _, line := range []string{"pid logs/nginx.pid;", "error_log logs/error.log warn;"} {
		if !strings.Contains(string(raw), "\n"+line+"\n") {
			t.Fatalf("examples/openresty/nginx.conf lacks the line %q", line)
		}
	}
	app := freeAddr(t)
	return startNginxConf(t, func(listen, dir string) string {
		r := strings.NewReplacer(
			"/opt/sluice/openresty/lib", libDir(t),
			"redis://127.0.0.1:6379", redisURL,
			// A loaded test machine misses 50 ms now and then, and the
			// test checks decisions, not the failure policy.
			"timeout = 50,", "timeout = 2000,",
			"listen 8080;", "listen "+listen+";",
			"127.0.0.1:9000", app,
			"http {", "http {\n"+nginxtest.Paths(dir),
			"pid logs/nginx.pid;", "pid "+dir+"/nginx.pid;",
			"error_log logs/error.log warn;", "error_log stderr warn;",
		)
		return "daemon off;\n" + r.Replace(string(raw))
	})
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestExample: the example admits 10 requests a second per token and
// answers the 11th as sluice serve does (429, Retry-After, the RateLimit
// fields, a quota-exceeded problem), to every spelling of the token, and a
// request without a token 400.
func TestExample(t *testing.T) {
	srv := redistest.Standalone(t)
	n := startExample(t, srv.URL())
	policy := `"10r/s";q=10;w=1, "500r/h";q=500;w=3600`
	for i := range 10 {
		resp, body := get(t, n.url+"/api/x?token=alice")
		if resp.StatusCode != http.StatusOK || body != "app\n" {
			t.Fatalf("request %d: %s %q, want 200 from the app", i+1, resp.Status, body)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != policy {
			t.Errorf("RateLimit-Policy = %q, want %q", got, policy)
		}
		want := regexp.MustCompile(`^"10r/s";r=` + strconv.Itoa(9-i) + `;t=[12], "500r/h";r=` + strconv.Itoa(499-i) + `;t=\d+$`)
		if got := resp.Header.Get("RateLimit"); !want.MatchString(got) {
			t.Errorf("request %d: RateLimit = %q, want %s", i+1, got, want)
		}
	}
	resp, body := get(t, n.url+"/api/x?token=alice")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("11th request: %s, want 429", resp.Status)
	}
	t.Logf("11th request: %s\nRetry-After: %s\nRateLimit-Policy: %s\nRateLimit: %s\n\n%s", resp.Status,
		resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit"), body)
	// A sliding window of a second: the wait is 1 s, or 2 when the ten
	// requests straddled a second's boundary.
	retry := resp.Header.Get("Retry-After")
	if retry != "1" && retry != "2" {
		t.Errorf("Retry-After = %q, want 1 or 2", retry)
	}
	if got, want := resp.Header.Get("RateLimit"), regexp.MustCompile(`^"10r/s";r=0;t=`+retry+`, "500r/h";r=490;t=\d+$`); !want.MatchString(got) {
		t.Errorf("denied RateLimit = %q, want %s", got, want)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type = %q", got)
	}
	wantBody := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded","status":429,"detail":"the rate limit is exceeded; retry after ` + retry + ` s","violated-policies":["10r/s"]}` + "\n"
	if body != wantBody {
		t.Errorf("denied body = %q, want %q", body, wantBody)
	}
	// Every spelling of the token is the token, as the application reads
	// it: percent-encoded, in the name too, or first of two.
	for _, q := range []string{"token=%61lice", "%74oken=%61%6C%69%63%65", "token=alice&token=bob"} {
		if resp, _ := get(t, n.url+"/api/x?"+q); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("?%s after alice's 10: %s, want 429", q, resp.Status)
		}
	}
	if resp, _ := get(t, n.url+"/api/x?token=bob"); resp.StatusCode != http.StatusOK {
		t.Errorf("another token: %s, want 200", resp.Status)
	}
	if resp, _ := get(t, n.url+"/api/x"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no token: %s, want 400", resp.Status)
	}
}
