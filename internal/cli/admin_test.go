package cli

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// adminServe runs "sluice serve" with the configuration yaml and the
// environment vars, and returns the base URL of each role's listener.
func adminServe(t *testing.T, yaml string, vars map[string]string) map[string]string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, _ := serveInProcess(t, vars, "-config", path)
	waitFor(t, stdout, stderr, regexp.MustCompile(`Metrics: `))
	urls := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^sluice: serving (\w+) on (http://\S+)$`).FindAllStringSubmatch(stdout.String(), -1) {
		urls[m[1]] = m[2]
	}
	return urls
}

// send posts body with a Content-Type and headers, and returns the status
// and the body.
func send(t *testing.T, url, contentType, body string, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(raw)
}

const (
	adminZones = "zones:\n  - {name: login, limits: 1r/h}\n"
	jsonType   = "application/json"
	formType   = "application/x-www-form-urlencoded" // what curl -d and an HTML form send
	aliceBody  = `{"zone":"login","key":"alice"}`
	adminToken = "s3cret-admin-token-0123456789"
)

// useUp spends alice's one request of the hour, so that a reset is seen.
func useUp(t *testing.T, api string) {
	t.Helper()
	send(t, api+"/v1/check", jsonType, aliceBody)
	if code, _, body := send(t, api+"/v1/check", jsonType, aliceBody); code != http.StatusTooManyRequests {
		t.Fatalf("second check: %d %s, want 429", code, body)
	}
}

// stillDenied fails the test when alice's state was reset.
func stillDenied(t *testing.T, api, after string) {
	t.Helper()
	if code, _, _ := send(t, api+"/v1/check", jsonType, aliceBody); code != http.StatusTooManyRequests {
		t.Errorf("after %s: check answered %d, want 429: the reset went through", after, code)
	}
}

// TestAdminFormPostRefused is a cross-site attack: a form-encoded
// POST (curl -d, or a web page's form sent by a browser to a localhost
// API) must not reset a key. It gets 415; application/json works (reset
// served to every client: admin.open).
func TestAdminFormPostRefused(t *testing.T) {
	api := adminServe(t, "listeners: [{addr: '127.0.0.1:0'}]\nadmin: {open: true}\n"+adminZones, nil)["api"]
	useUp(t, api)
	for _, ct := range []string{formType, "text/plain", "multipart/form-data; boundary=x", ""} {
		code, h, body := send(t, api+"/v1/reset", ct, aliceBody)
		if code != http.StatusUnsupportedMediaType || h.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, "application/json") {
			t.Errorf("reset with Content-Type %q: %d %s %s, want 415 problem+json", ct, code, h.Get("Content-Type"), body)
		}
		stillDenied(t, api, "a "+ct+" reset")
	}
	// The attack as reported: curl -d, which sends a form content type.
	if _, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-d", aliceBody, api+"/v1/reset").Output()
		if err != nil || string(out) != "415" {
			t.Errorf("curl -d reset: status %q (%v), want 415", out, err)
		}
		stillDenied(t, api, "curl -d")
	}
	// A page cannot send JSON instead: the CORS preflight it needs fails.
	req, _ := http.NewRequest(http.MethodOptions, api+"/v1/reset", nil)
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 == 2 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS preflight: %s, Access-Control-Allow-Origin %q; want a refusal without it", resp.Status, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if code, _, body := send(t, api+"/v1/check", formType, aliceBody); code != http.StatusUnsupportedMediaType {
		t.Errorf("form-encoded check: %d %s, want 415", code, body)
	}
	if code, _, body := send(t, api+"/v1/reset", "application/json; charset=utf-8", aliceBody); code != http.StatusNoContent {
		t.Fatalf("JSON reset: %d %s, want 204", code, body)
	}
	if code, _, _ := send(t, api+"/v1/check", jsonType, aliceBody); code != http.StatusOK {
		t.Errorf("after the JSON reset: %d, want 200", code)
	}
}

// TestAdminListenerSeparate: with an admin listener, reset is not served
// on the listener nginx reaches for /v1/auth.
func TestAdminListenerSeparate(t *testing.T) {
	urls := adminServe(t, "listeners:\n  - {addr: '127.0.0.1:0', serve: api}\n  - {addr: '127.0.0.1:0', serve: admin}\n"+adminZones, nil)
	api, admin := urls["api"], urls["admin"]
	if api == "" || admin == "" {
		t.Fatalf("listeners %v, want api and admin", urls)
	}
	useUp(t, api)
	code, _, body := send(t, api+"/v1/reset", jsonType, aliceBody)
	if code != http.StatusNotFound || !strings.Contains(body, "served on the admin listener") {
		t.Errorf("reset on the api listener: %d %s, want 404", code, body)
	}
	stillDenied(t, api, "a reset on the api listener")
	if code, _, body := send(t, admin+"/v1/check", jsonType, aliceBody); code != http.StatusNotFound {
		t.Errorf("check on the admin listener: %d %s, want 404 (check is not an admin endpoint here)", code, body)
	}
	if resp, err := http.Get(admin + "/v1/auth?zone=login"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("auth on the admin listener: %v %v, want 404", resp.StatusCode, err)
	}
	if code, _, body := send(t, admin+"/v1/reset", jsonType, aliceBody); code != http.StatusNoContent {
		t.Fatalf("reset on the admin listener: %d %s, want 204", code, body)
	}
	if code, _, _ := send(t, api+"/v1/check", jsonType, aliceBody); code != http.StatusOK {
		t.Errorf("after the admin reset: %d, want 200", code)
	}
	// "sluice reset" pointed at the admin listener.
	var stdout, stderr bytes.Buffer
	if code := Main(t.Context(), []string{"reset", "-server", admin, "-zone", "login", "alice"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(nil)}); code != 0 {
		t.Errorf("sluice reset -server admin: exit %d, stderr %s", code, &stderr)
	}
}

// TestAdminBannerCurlLine: when check is an admin endpoint behind a token,
// the banner's curl line goes to the admin listener with the token, and
// works as printed.
func TestAdminBannerCurlLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	os.WriteFile(path, []byte("listeners:\n  - {addr: '127.0.0.1:0', serve: api}\n  - {addr: '127.0.0.1:0', serve: admin}\nadmin: {endpoints: [reset, check]}\n"+adminZones), 0o600)
	stdout, stderr, _ := serveInProcess(t, map[string]string{"SLUICE_ADMIN_TOKEN": adminToken}, "-config", path)
	m := waitFor(t, stdout, stderr, regexp.MustCompile(`(?m)^  (curl .*)$`))
	admin := regexp.MustCompile(`(?m)^sluice: serving admin on (http://\S+)$`).FindStringSubmatch(stdout.String())
	if admin == nil || !strings.Contains(m[1], admin[1]+"/v1/check") || !strings.Contains(m[1], `-H "Authorization: Bearer $SLUICE_ADMIN_TOKEN"`) {
		t.Fatalf("curl line %q: want the admin listener and the token header", m[1])
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	cmd := exec.Command("sh", "-c", m[1])
	cmd.Env = append(os.Environ(), "SLUICE_ADMIN_TOKEN="+adminToken)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "HTTP/1.1 200") {
		t.Errorf("%s: %v\n%s", m[1], err, out)
	}
}

// TestAdminEndpointsCheck: check can be made an admin endpoint too.
func TestAdminEndpointsCheck(t *testing.T) {
	urls := adminServe(t, "listeners:\n  - {addr: '127.0.0.1:0', serve: api}\n  - {addr: '127.0.0.1:0', serve: admin}\nadmin: {endpoints: [reset, check]}\n"+adminZones, nil)
	if code, _, body := send(t, urls["api"]+"/v1/check", jsonType, aliceBody); code != http.StatusNotFound {
		t.Errorf("check on the api listener: %d %s, want 404", code, body)
	}
	if code, _, body := send(t, urls["admin"]+"/v1/check", jsonType, aliceBody); code != http.StatusOK {
		t.Errorf("check on the admin listener: %d %s, want 200", code, body)
	}
}

// TestAdminToken: with a token, from SLUICE_ADMIN_TOKEN or a token file,
// a reset without it or with a wrong one gets 401 and changes nothing.
func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		yaml string
		vars map[string]string
	}{
		{"env", "", map[string]string{"SLUICE_ADMIN_TOKEN": adminToken}},
		{"file", "admin: {token_file: " + tokenFile + "}\n", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := adminServe(t, "listeners: [{addr: '127.0.0.1:0'}]\n"+tt.yaml+adminZones, tt.vars)["api"]
			useUp(t, api)
			for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Bearer " + adminToken + "x", "Basic " + adminToken, adminToken} {
				code, h, body := send(t, api+"/v1/reset", jsonType, aliceBody, "Authorization", auth)
				if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") || strings.Contains(body, adminToken) {
					t.Errorf("Authorization %q: %d %q %s, want 401 with WWW-Authenticate", auth, code, h.Get("WWW-Authenticate"), body)
				}
				stillDenied(t, api, "a reset with Authorization "+auth)
			}
			// The token does not guard check, which is not an admin endpoint.
			if code, _, _ := send(t, api+"/v1/check", jsonType, `{"zone":"login","key":"bob"}`); code != http.StatusOK {
				t.Errorf("check without a token: %d, want 200", code)
			}
			var stdout, stderr bytes.Buffer
			if code := Main(t.Context(), []string{"reset", "-server", api, "-zone", "login", "alice"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(nil)}); code != 1 || !strings.Contains(stderr.String(), "401") {
				t.Errorf("sluice reset without SLUICE_ADMIN_TOKEN: exit %d, stderr %s; want 1 and 401", code, &stderr)
			}
			stderr.Reset()
			if code := Main(t.Context(), []string{"reset", "-server", api, "-zone", "login", "alice"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(map[string]string{"SLUICE_ADMIN_TOKEN": adminToken})}); code != 0 {
				t.Fatalf("sluice reset with SLUICE_ADMIN_TOKEN: exit %d, stderr %s", code, &stderr)
			}
			if code, _, _ := send(t, api+"/v1/check", jsonType, aliceBody); code != http.StatusOK {
				t.Errorf("after the authorized reset: %d, want 200", code)
			}
		})
	}
}

// TestAdminMetrics: /metrics, whose labels name every zone, can be taken
// off the api listener and put behind the token; by default it is on
// both listeners.
func TestAdminMetrics(t *testing.T) {
	get := func(url, auth string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const listeners = "listeners:\n  - {addr: '127.0.0.1:0', serve: api}\n  - {addr: '127.0.0.1:0', serve: admin}\n"
	urls := adminServe(t, listeners+adminZones, nil)
	if a, b := get(urls["api"], ""), get(urls["admin"], ""); a != http.StatusOK || b != http.StatusOK {
		t.Errorf("default: /metrics %d on api, %d on admin; want 200 on both", a, b)
	}
	urls = adminServe(t, listeners+"admin: {endpoints: [reset, metrics]}\n"+adminZones, map[string]string{"SLUICE_ADMIN_TOKEN": adminToken})
	for _, tt := range []struct {
		url, auth string
		want      int
	}{
		{urls["api"], "Bearer " + adminToken, http.StatusNotFound},
		{urls["admin"], "", http.StatusUnauthorized},
		{urls["admin"], "Bearer nope-nope-nope-nope", http.StatusUnauthorized},
		{urls["admin"], "Bearer " + adminToken, http.StatusOK},
	} {
		if got := get(tt.url, tt.auth); got != tt.want {
			t.Errorf("metrics as admin endpoint: GET %s/metrics with %q: %d, want %d", tt.url, tt.auth, got, tt.want)
		}
	}
}
