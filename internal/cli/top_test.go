package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/keyname"
	"github.com/sluicehq/sluice/internal/server"
	"github.com/sluicehq/sluice/internal/top"
)

// TestTop runs "sluice serve" with an admin listener and a token, pushes
// two keys over their limit, and reads them with "sluice top": the text
// view (a key shown, a key hidden by its digest), the JSON, a refreshing
// run stopped by its context, and the refusal without the token. The
// hidden key is listed under its digest keyed with the configured
// secret (SLUICE_TOP_DIGEST_SECRET), never its plain SHA-256.
func TestTop(t *testing.T) {
	const secret = "digest-secret-0123456789"
	urls := adminServe(t, "listeners:\n  - {addr: '127.0.0.1:0', serve: api}\n  - {addr: '127.0.0.1:0', serve: admin}\n"+
		"zones:\n  - {name: login, limits: 1r/h, show_keys: true}\n  - {name: tokens, limits: 1r/h}\n",
		map[string]string{"SLUICE_ADMIN_TOKEN": adminToken, "SLUICE_TOP_DIGEST_SECRET": secret})
	ids, err := top.New(top.Options{DigestKey: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	api, admin := urls["api"], urls["admin"]
	for range 3 {
		send(t, api+"/v1/check", jsonType, aliceBody)
		send(t, api+"/v1/check", jsonType, `{"zone":"tokens","key":"tok_secret_1"}`)
	}
	withToken := envOf(map[string]string{"SLUICE_ADMIN_TOKEN": adminToken})
	var stdout, stderr bytes.Buffer
	if code := Main(t.Context(), []string{"top", "-server", admin, "-once"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: withToken}); code != 0 {
		t.Fatalf("sluice top -once: exit %d: %s", code, &stderr)
	}
	out := stdout.String()
	for _, want := range []string{"login  1r/h", "denied    alice", ids.ID("tok_secret_1"), "store memory"} {
		if !strings.Contains(out, want) {
			t.Errorf("sluice top -once: no %q in\n%s", want, out)
		}
	}
	if plain := keyname.Of("tok_secret_1"); strings.Contains(out, plain) {
		t.Errorf("the hidden key's plain digest %s is printed:\n%s", plain, out)
	}
	if strings.Contains(out, "tok_secret_1") {
		t.Errorf("a hidden key is printed:\n%s", out)
	}

	stdout.Reset()
	if code := Main(t.Context(), []string{"top", "-server", admin, "-json", "-zone", "login"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: withToken}); code != 0 {
		t.Fatalf("sluice top -json: exit %d: %s", code, &stderr)
	}
	var rep struct {
		Zones []struct {
			Name   string
			Denied []struct{ Key string }
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || len(rep.Zones) != 1 || len(rep.Zones[0].Denied) != 1 || rep.Zones[0].Denied[0].Key != "alice" {
		t.Errorf("sluice top -json -zone login: %v %+v", err, rep)
	}

	// Refreshing: two views at least, then the context ends the command.
	stdout.Reset()
	ctx, cancel := context.WithCancel(t.Context())
	w := &countingWriter{target: 2, done: cancel}
	if code := Main(ctx, []string{"top", "-server", admin, "-interval", "100ms"}, Env{Stdout: w, Stderr: &stderr, Getenv: withToken}); code != 0 {
		t.Errorf("refreshing sluice top: exit %d: %s", code, &stderr)
	}

	stderr.Reset()
	if code := Main(t.Context(), []string{"top", "-server", admin, "-once"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(nil)}); code != 1 || !strings.Contains(stderr.String(), "401") {
		t.Errorf("sluice top without the token: exit %d, %s; want 1 and 401", code, &stderr)
	}
}

// countingWriter counts the views written (each starts "sluice top") and
// calls done once target were.
type countingWriter struct {
	views, target int
	done          func()
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("sluice top")) {
		if w.views++; w.views == w.target {
			w.done()
		}
	}
	return len(p), nil
}

// TestTopSaysSampling: a zone whose tracker samples under a flood says so
// in the text view (its counts are estimates then); one that does not,
// says nothing.
func TestTopSaysSampling(t *testing.T) {
	for _, sampling := range []int64{1, 16} {
		rep := &server.TopReport{Zones: []server.TopZone{{Name: "api"}}}
		rep.Zones[0].Sampling = sampling
		var b bytes.Buffer
		writeTop(&b, rep, "http://x")
		if got, want := strings.Contains(b.String(), "1 check in 16 observed"), sampling > 1; got != want {
			t.Errorf("sampling %d: said %v, want %v:\n%s", sampling, got, want, &b)
		}
	}
}

// TestTopHostileKey: a client-chosen key of a show_keys zone that would
// clear the operator's screen, set the window title, reverse the text's
// direction and forge a row reaches "sluice top" quoted, with Go escapes:
// no control byte, no format character, no extra line.
func TestTopHostileKey(t *testing.T) {
	const hostile = "\u001b[2J\u001b[31mEVIL\u001b]0;owned\u0007\nfake line\u202e\r"
	urls := adminServe(t, "listeners:\n  - {addr: '127.0.0.1:0', serve: api}\n  - {addr: '127.0.0.1:0', serve: admin}\n"+
		"zones:\n  - {name: login, limits: 1r/h, show_keys: true}\n", map[string]string{"SLUICE_ADMIN_TOKEN": adminToken})
	body, err := json.Marshal(map[string]string{"zone": "login", "key": hostile})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is denied: listed
		send(t, urls["api"]+"/v1/check", jsonType, string(body))
	}
	var stdout, stderr bytes.Buffer
	if code := Main(t.Context(), []string{"top", "-server", urls["admin"], "-once"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(map[string]string{"SLUICE_ADMIN_TOKEN": adminToken})}); code != 0 {
		t.Fatalf("sluice top -once: exit %d: %s", code, &stderr)
	}
	out := stdout.String()
	for i, r := range out {
		if r != '\n' && (r < 0x20 || r == 0x7f || r == '\u202e') {
			t.Errorf("output byte %d is %U, a control or format character:\n%q", i, r, out)
			break
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "fake line") {
			t.Errorf("the key forged a row %q:\n%s", line, out)
		}
	}
	if want := `"\x1b[2J\x1b[31mEVIL\x1b]0;owned\a\nfake line\u202e\r"`; !strings.Contains(out, want) {
		t.Errorf("no %s in:\n%s", want, out)
	}
}

// TestTopCounts: the text view shows a count with what Space-Saving
// guarantees of it (a key that took over a counter of 43 with one denial
// shows 1-44, not 44) and marks the counts of a sampled list as
// estimates: the admitted list when top.sample is above 1, every list
// under a flood.
func TestTopCounts(t *testing.T) {
	for _, tc := range []struct {
		name             string
		sample, sampling int64
		denied, admitted string
	}{
		{"exact", 1, 1, "1-44", "33"},
		{"sampled admitted", 32, 1, "1-44", "~33"},
		{"flood", 32, 16, "~1-44", "~33"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := server.TopZone{Name: "api", Sample: int(tc.sample)}
			z.Sampling = tc.sampling
			z.Denied = []top.Key{{ID: "hmac:0000000000000001", Count: 44, Error: 43}}
			z.Admitted = []top.Key{{ID: "hmac:0000000000000002", Count: 33}}
			var b bytes.Buffer
			writeTop(&b, &server.TopReport{Zones: []server.TopZone{z}}, "http://x")
			for _, want := range []string{"hmac:0000000000000001  " + tc.denied + " ", "hmac:0000000000000002  " + tc.admitted + " "} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("no %q in:\n%s", want, &b)
				}
			}
		})
	}
}
