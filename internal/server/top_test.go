package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
)

const topToken = "top-token-0123456789"

// topConfig serves an api and an admin listener, a zone showing its keys,
// a shadow zone and a zone hiding its keys; every check observed.
const topConfig = `
listeners: [{addr: "127.0.0.1:0"}, {addr: "127.0.0.1:0", serve: admin}]
zones:
  - {name: login, limits: 3r/m, show_keys: true}
  - {name: trial, limits: 2r/m, shadow: true}
  - {name: tokens, limits: 2r/m}
top: {sample: 1}
`

// topServerConfig is topConfig with the admin token topToken.
func topServerConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := parseConfig(t, topConfig)
	if err := cfg.Override(config.Overrides{AdminToken: topToken}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// adminURL is the base URL of ts's admin listener.
func adminURL(t *testing.T, ts *testServer) string {
	t.Helper()
	for _, a := range ts.Addrs() {
		if a.Role == config.AdminRole {
			return "http://" + a.Addr
		}
	}
	t.Fatal("no admin listener")
	return ""
}

func getTop(t *testing.T, url, token string) (*http.Response, TopReport) {
	t.Helper()
	resp, body := get(t, url, map[string]string{"Authorization": "Bearer " + token})
	var rep TopReport
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &rep); err != nil {
			t.Fatalf("%s: %v\n%s", url, err, body)
		}
	}
	return resp, rep
}

func zoneOf(t *testing.T, rep TopReport, name string) TopZone {
	t.Helper()
	for _, z := range rep.Zones {
		if z.Name == name {
			return z
		}
	}
	t.Fatalf("zone %s not in the report: %+v", name, rep.Zones)
	return TopZone{}
}

// TestTopAPI drives real traffic through POST /v1/check and reads GET
// /v1/top on the admin listener: denied keys, shadow denials, near-limit
// keys, hidden keys, the token, and a reset by ID.
func TestTopAPI(t *testing.T) {
	ts := start(t, topServerConfig(t), Options{})
	admin := adminURL(t, ts)
	secret := "sk_live_secret_token_42"
	for range 5 {
		post(t, ts.api+"/v1/check", `{"zone":"login","key":"alice"}`)
		post(t, ts.api+"/v1/check", `{"zone":"trial","key":"bob"}`)
		post(t, ts.api+"/v1/check", `{"zone":"tokens","key":"`+secret+`"}`)
	}
	post(t, ts.api+"/v1/check", `{"zone":"login","key":"carol"}`)
	post(t, ts.api+"/v1/check", `{"zone":"login","key":"carol"}`)
	post(t, ts.api+"/v1/check", `{"zone":"login","key":"carol"}`) // 3/3: near

	for _, tc := range []struct {
		name, url, token string
		want             int
	}{
		{"no token", admin + "/v1/top", "", http.StatusUnauthorized},
		{"wrong token", admin + "/v1/top", "wrong", http.StatusUnauthorized},
		{"api listener", ts.api + "/v1/top", topToken, http.StatusNotFound},
		{"unknown zone", admin + "/v1/top?zone=nope", topToken, http.StatusNotFound},
		{"bad n", admin + "/v1/top?n=0", topToken, http.StatusBadRequest},
		{"one zone", admin + "/v1/top?zone=login", topToken, http.StatusOK},
	} {
		if resp, _ := getTop(t, tc.url, tc.token); resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	resp, body := get(t, admin+"/v1/top", map[string]string{"Authorization": "Bearer " + topToken})
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), secret) {
		t.Fatalf("GET /v1/top: %d; a hidden key must not appear:\n%s", resp.StatusCode, body)
	}
	_, rep := getTop(t, admin+"/v1/top", topToken)
	login := zoneOf(t, rep, "login")
	if len(login.Denied) != 1 || login.Denied[0].Key != "alice" || login.Denied[0].Count != 2 {
		t.Errorf("login denied = %+v, want alice twice", login.Denied)
	}
	if len(login.Near) != 2 || strings.Join(login.Limits, ",") != "3r/m" {
		t.Errorf("login near = %+v (alice and carol), limits %v", login.Near, login.Limits)
	}
	trial := zoneOf(t, rep, "trial")
	if len(trial.Denied) != 1 || !trial.Denied[0].Shadow || trial.Denied[0].ID != ts.top.ID("bob") || trial.Denied[0].Key != "" {
		t.Errorf("trial denied = %+v, want bob shadow-denied, by digest", trial.Denied)
	}
	tokens := zoneOf(t, rep, "tokens")
	if len(tokens.Denied) != 1 || tokens.Denied[0].ID != ts.top.ID(secret) || !tokens.Denied[0].Resettable {
		t.Fatalf("tokens denied = %+v, want the secret by digest", tokens.Denied)
	}

	reset := func(token, body string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, admin+"/v1/top/reset", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	idBody := `{"zone":"tokens","id":"` + ts.top.ID(secret) + `"}`
	if got := reset("wrong", idBody); got != http.StatusUnauthorized {
		t.Errorf("reset with a wrong token: %d, want 401", got)
	}
	if got := reset(topToken, `{"zone":"tokens","id":"sha256:0000000000000000"}`); got != http.StatusNotFound {
		t.Errorf("reset of an unlisted ID: %d, want 404", got)
	}
	if got := reset(topToken, idBody); got != http.StatusNoContent {
		t.Fatalf("reset: %d, want 204", got)
	}
	if _, rep = getTop(t, admin+"/v1/top?zone=tokens", topToken); len(rep.Zones[0].Denied) != 0 {
		t.Errorf("after the reset: denied = %+v, want none", rep.Zones[0].Denied)
	}
	if resp, _ := post(t, ts.api+"/v1/check", `{"zone":"tokens","key":"`+secret+`"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("a check after the reset: %d, want 200 (the state was forgotten)", resp.StatusCode)
	}
	if strings.Contains(ts.logs.String(), secret) {
		t.Errorf("the key is in the log")
	}
}

// TestTopUI checks the page's files, their Content-Security-Policy, and
// that they are served on the admin listener only.
func TestTopUI(t *testing.T) {
	ts := start(t, topServerConfig(t), Options{})
	admin := adminURL(t, ts)
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/ui/", "text/html", `<script src="/ui/app.js"`},
		{"/ui/app.js", "javascript", "/v1/top"},
		{"/ui/app.css", "text/css", "svg.chart"},
	} {
		resp, body := get(t, admin+tc.path, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(string(body), tc.contains) {
			t.Errorf("%s: %d %s", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: Content-Security-Policy %q", tc.path, csp)
		}
	}
	if resp, _ := get(t, admin+"/ui/nope.js", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/ui/nope.js: %d, want 404", resp.StatusCode)
	}
	if resp, _ := get(t, ts.api+"/ui/", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/ui/ on the api listener: %d, want 404", resp.StatusCode)
	}
}

// TestTopDisabled: with top.enabled false nothing is tracked or served.
func TestTopDisabled(t *testing.T) {
	ts := start(t, parseConfig(t, "listeners: [{addr: '127.0.0.1:0'}]\nzones: [{name: a, limits: 1r/s}]\ntop: {enabled: false}\n"), Options{})
	post(t, ts.api+"/v1/check", `{"zone":"a","key":"k"}`)
	for _, path := range []string{"/v1/top", "/ui/"} {
		if resp, _ := get(t, ts.api+path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
		}
	}
}

// TestTopReloadKeepsCounts: a reload keeps the lists of zones that stay.
func TestTopReloadKeepsCounts(t *testing.T) {
	ts := start(t, parseConfig(t, "listeners: [{addr: '127.0.0.1:0'}]\nzones: [{name: a, limits: 1r/m, show_keys: true}, {name: b, limits: 1r/m}]\n"), Options{})
	post(t, ts.api+"/v1/check", `{"zone":"a","key":"k"}`)
	post(t, ts.api+"/v1/check", `{"zone":"a","key":"k"}`)
	if err := ts.apply(parseConfig(t, "listeners: [{addr: '127.0.0.1:0'}]\nzones: [{name: a, limits: 1r/m, show_keys: true}]\n")); err != nil {
		t.Fatal(err)
	}
	_, rep := getTop(t, ts.api+"/v1/top", "")
	if len(rep.Zones) != 1 || len(rep.Zones[0].Denied) != 1 {
		t.Errorf("after the reload: %+v, want zone a alone with k denied", rep.Zones)
	}
}

// TestTopRLSDomain: the rate-limit service's decisions (here through
// POST /json) are tracked per domain, as "rls/DOMAIN", keys hidden; a
// listed descriptor is reset by its ID through POST /v1/top/reset (the
// counter of the rule it selects), after which it is allowed again and
// no longer listed, while another descriptor keeps its count.
func TestTopRLSDomain(t *testing.T) {
	dir := t.TempDir()
	rules := "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, "listeners: [{addr: '127.0.0.1:0'}, {addr: '127.0.0.1:0', serve: grpc}]\nrls: {config_dir: '"+dir+"'}\ntop: {sample: 1}\nadmin: {open: true}\n")
	ts := start(t, cfg, Options{})
	ask := func(user string) int {
		t.Helper()
		resp, _ := post(t, ts.api+"/json", `{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"`+user+`"}]}]}`)
		return resp.StatusCode
	}
	for range 4 {
		ask("eve")
		ask("mallory")
	}
	resp, rep := getTop(t, ts.api+"/v1/top?zone=rls/edge", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/top?zone=rls/edge: %d", resp.StatusCode)
	}
	z := rep.Zones[0]
	if z.Kind != "rls" || len(z.Denied) != 2 || z.Denied[0].Count != 2 || z.Denied[0].Key != "" || !z.Denied[0].Resettable {
		t.Fatalf("rls/edge = %+v, want two keys denied twice each, hidden, resettable", z)
	}
	// The descriptor's counter key, as the service builds it.
	eve := ts.top.ID("4:user3:eve")
	if z.Denied[0].ID != eve && z.Denied[1].ID != eve {
		t.Fatalf("denied IDs %s, %s; want eve's %s among them", z.Denied[0].ID, z.Denied[1].ID, eve)
	}
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"zone":"rls/edge","id":"` + ts.top.ID("4:user5:nobody") + `"}`, http.StatusNotFound},
		{`{"zone":"rls/other","id":"` + eve + `"}`, http.StatusNotFound},
		{`{"zone":"rls/edge","id":"` + eve + `"}`, http.StatusNoContent},
	} {
		if resp, body := post(t, ts.api+"/v1/top/reset", tc.body); resp.StatusCode != tc.want {
			t.Errorf("POST /v1/top/reset %s: %d %s, want %d", tc.body, resp.StatusCode, body, tc.want)
		}
	}
	_, rep = getTop(t, ts.api+"/v1/top?zone=rls/edge", "")
	if d := rep.Zones[0].Denied; len(d) != 1 || d[0].ID == eve {
		t.Errorf("denied after eve's reset = %+v, want mallory alone", d)
	}
	if got := ask("eve"); got != http.StatusOK {
		t.Errorf("eve after her reset: %d, want 200", got)
	}
	if got := ask("mallory"); got != http.StatusTooManyRequests {
		t.Errorf("mallory after eve's reset: %d, want 429", got)
	}
}
