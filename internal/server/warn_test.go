package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/keyname"
	"github.com/sluicehq/sluice/internal/top"
)

// TestSafeDefaults: with neither an admin listener nor a token, a limited
// client cannot lift its own limit: POST /v1/reset and POST /v1/top/reset
// answer 403 saying how to enable them (with the ID the open /v1/top
// lists, or the key's plain SHA-256), the key stays denied, the listed
// ID is not the key's plain SHA-256, and the start-up warnings name what
// is off and what is open. admin.open: true serves both and the warning
// names them; an admin listener silences the warnings.
func TestSafeDefaults(t *testing.T) {
	const zones = "zones: [{name: login, limits: 1r/h}]\n"
	check := func(ts *testServer) int {
		t.Helper()
		resp, _ := post(t, ts.api+"/v1/check", `{"zone":"login","key":"mallory"}`)
		return resp.StatusCode
	}
	listedID := func(ts *testServer) string {
		t.Helper()
		_, rep := getTop(t, ts.api+"/v1/top?zone=login", "")
		if len(rep.Zones) != 1 || len(rep.Zones[0].Denied) != 1 {
			t.Fatalf("GET /v1/top: %+v, want mallory denied", rep)
		}
		return rep.Zones[0].Denied[0].ID
	}
	warnings := func(ts *testServer) string {
		var out []string
		for _, line := range strings.Split(ts.logs.String(), "\n") {
			if strings.Contains(line, "level=WARN") {
				out = append(out, line)
			}
		}
		return strings.Join(out, "\n")
	}

	t.Run("default", func(t *testing.T) {
		ts := start(t, parseConfig(t, "listeners: [{addr: '127.0.0.1:0'}]\n"+zones), Options{})
		logs := warnings(ts)
		for _, want := range []string{"off, answered 403: POST /v1/reset, POST /v1/top/reset", "open to every client of the api listeners: GET /v1/top, GET /ui"} {
			if !strings.Contains(logs, want) {
				t.Errorf("no warning %q in:\n%s", want, logs)
			}
		}
		check(ts)
		if got := check(ts); got != http.StatusTooManyRequests {
			t.Fatalf("second check: %d, want 429", got)
		}
		id := listedID(ts)
		if id == keyname.Of("mallory") || id != ts.top.ID("mallory") {
			t.Errorf("listed as %s; want the keyed %s, not the plain %s", id, ts.top.ID("mallory"), keyname.Of("mallory"))
		}
		for _, tc := range []struct{ path, body string }{
			{"/v1/top/reset", `{"zone":"login","id":"` + id + `"}`},
			{"/v1/top/reset", `{"zone":"login","id":"` + keyname.Of("mallory") + `"}`},
			{"/v1/reset", `{"zone":"login","key":"mallory"}`},
		} {
			resp, body := post(t, ts.api+tc.path, tc.body)
			var p struct{ Detail string }
			json.Unmarshal(body, &p)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(p.Detail, "admin.open: true") || !strings.Contains(p.Detail, "admin.token_file") {
				t.Errorf("POST %s %s: %d %s; want 403 saying how to enable it", tc.path, tc.body, resp.StatusCode, body)
			}
		}
		if got := check(ts); got != http.StatusTooManyRequests {
			t.Errorf("check after the refused resets: %d, want 429 (still limited)", got)
		}
	})

	t.Run("admin.open", func(t *testing.T) {
		ts := start(t, parseConfig(t, "listeners: [{addr: '127.0.0.1:0'}]\nadmin: {open: true}\n"+zones), Options{})
		if want, logs := "open to every client of the api listeners: POST /v1/reset, POST /v1/top/reset, GET /v1/top, GET /ui.", warnings(ts); !strings.Contains(logs, want) {
			t.Errorf("no warning %q in:\n%s", want, logs)
		}
		check(ts)
		check(ts)
		if resp, body := post(t, ts.api+"/v1/top/reset", `{"zone":"login","id":"`+listedID(ts)+`"}`); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("POST /v1/top/reset: %d %s, want 204", resp.StatusCode, body)
		}
		if got := check(ts); got != http.StatusOK {
			t.Errorf("check after the reset: %d, want 200", got)
		}
	})

	t.Run("admin listener", func(t *testing.T) {
		ts := start(t, parseConfig(t, "listeners: [{addr: '127.0.0.1:0'}, {addr: '127.0.0.1:0', serve: admin}]\n"+zones), Options{})
		if logs := warnings(ts); logs != "" {
			t.Errorf("warnings with an admin listener:\n%s", logs)
		}
	})
}

// TestDigestSecretShared: two servers configured with one digest secret
// list a key under one ID, the HMAC of the key under that secret; two
// servers without one list it under different IDs.
func TestDigestSecretShared(t *testing.T) {
	const yaml = "listeners: [{addr: '127.0.0.1:0'}]\nzones: [{name: login, limits: 1r/h}]\n"
	id := func(secret string) string {
		t.Helper()
		cfg := parseConfig(t, yaml)
		cfg.Top.DigestSecret = secret
		ts := start(t, cfg, Options{})
		for range 2 {
			post(t, ts.api+"/v1/check", `{"zone":"login","key":"203.0.113.9"}`)
		}
		_, rep := getTop(t, ts.api+"/v1/top?zone=login", "")
		if len(rep.Zones) != 1 || len(rep.Zones[0].Denied) != 1 {
			t.Fatalf("GET /v1/top: %+v, want the key denied", rep)
		}
		return rep.Zones[0].Denied[0].ID
	}
	const secret = "fleet-digest-secret-0123"
	ids, err := top.New(top.Options{DigestKey: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	if a, b, want := id(secret), id(secret), ids.ID("203.0.113.9"); a != want || b != want {
		t.Errorf("IDs with one secret: %s, %s; want %s twice", a, b, want)
	}
	if a, b := id(""), id(""); a == b {
		t.Errorf("IDs without a secret: %s twice, want a secret per process", a)
	}
}
