package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

const apiConfig = `
listeners: [{addr: "127.0.0.1:0", max_body_bytes: 4096}]
admin: {open: true}
zones:
  - name: three
    limits: 3r/m
  - name: two-limits
    limits:
      - {spec: 2r/s, name: burst}
      - {spec: 5r/h, name: hourly, algorithm: log}
  - name: trial
    limits: 1r/m
    shadow: true
`

func TestCheckAllowsThenDenies(t *testing.T) {
	ts := start(t, parseConfig(t, apiConfig), Options{})
	for i := range 3 {
		resp, raw := post(t, ts.api+"/v1/check", `{"zone":"three","key":"alice"}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("check %d: status %d, want 200 (%s)", i, resp.StatusCode, raw)
		}
		d := decodeDecision(t, raw)
		if !d.Allowed || d.Source != "store" || len(d.Limits) != 1 || d.Limits[0].Remaining != int64(2-i) {
			t.Fatalf("check %d: got %+v, want allowed with %d remaining", i, d, 2-i)
		}
		if got, want := resp.Header.Get("RateLimit-Policy"), `"3r/m";q=3;w=60`; got != want {
			t.Errorf("RateLimit-Policy %q, want %q", got, want)
		}
		if got, want := resp.Header.Get("RateLimit"), fmt.Sprintf(`"3r/m";r=%d;t=`, 2-i); !strings.HasPrefix(got, want) {
			t.Errorf("RateLimit %q, want prefix %q", got, want)
		}
	}
	resp, raw := post(t, ts.api+"/v1/check", `{"zone":"three","key":"alice"}`)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("4th check: status %d, want 429 (%s)", resp.StatusCode, raw)
	}
	d := decodeDecision(t, raw)
	if d.Allowed || d.RetryAfter <= 0 || d.Limits[0].Allowed || d.Limits[0].RetryAfter != d.RetryAfter || d.Limits[0].Used != 3 {
		t.Errorf("4th check: got %+v, want denied with a retry_after", d)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || float64(ra) < d.RetryAfter {
		t.Errorf("Retry-After %q, want whole seconds >= %v", resp.Header.Get("Retry-After"), d.RetryAfter)
	}
	// Another key is not affected.
	if resp, raw := post(t, ts.api+"/v1/check", `{"zone":"three","key":"bob"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("bob: status %d (%s)", resp.StatusCode, raw)
	}
	if got := metricValue(t, ts.api, `sluice_checks_total{result="denied",zone="three"}`); got != 1 {
		t.Errorf("denied checks metric %v, want 1", got)
	}
	if got := metricValue(t, ts.api, `sluice_checks_total{result="allowed",zone="three"}`); got != 4 {
		t.Errorf("allowed checks metric %v, want 4", got)
	}
}

func TestCheckKeysAndLimits(t *testing.T) {
	ts := start(t, parseConfig(t, apiConfig), Options{})
	resp, raw := post(t, ts.api+"/v1/check", `{"zone":"two-limits","keys":["a","b"],"cost":2}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d (%s)", resp.StatusCode, raw)
	}
	d := decodeDecision(t, raw)
	if len(d.Limits) != 4 {
		t.Fatalf("got %d limit results, want 4 (2 keys × 2 limits): %s", len(d.Limits), raw)
	}
	for i, want := range []struct {
		key, name, algo string
		remaining       int64
	}{{"a", "burst", "sliding-window", 0}, {"a", "hourly", "log", 3}, {"b", "burst", "sliding-window", 0}, {"b", "hourly", "log", 3}} {
		got := d.Limits[i]
		if got.Key != want.key || got.Name != want.name || got.Algorithm != want.algo || got.Remaining != want.remaining {
			t.Errorf("limits[%d]: got %+v, want %+v", i, got, want)
		}
	}
	// The burst limit of b denies; nothing is recorded on a.
	resp, raw = post(t, ts.api+"/v1/check", `{"zone":"two-limits","keys":["c","b"]}`)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429 (%s)", resp.StatusCode, raw)
	}
	resp, raw = post(t, ts.api+"/v1/check", `{"zone":"two-limits","key":"c","cost":0}`)
	if d := decodeDecision(t, raw); resp.StatusCode != http.StatusOK || d.Limits[0].Used != 0 {
		t.Errorf("peek of c after a denied check: got %s, want nothing used", raw)
	}
}

func TestShadowZoneNeverDenies(t *testing.T) {
	ts := start(t, parseConfig(t, apiConfig), Options{})
	post(t, ts.api+"/v1/check", `{"zone":"trial","key":"k"}`)
	resp, raw := post(t, ts.api+"/v1/check", `{"zone":"trial","key":"k"}`)
	d := decodeDecision(t, raw)
	if resp.StatusCode != http.StatusOK || !d.Allowed || !d.Shadowed || !d.Limits[0].Shadow {
		t.Errorf("second check: status %d, %+v; want allowed and shadowed", resp.StatusCode, d)
	}
	if got := metricValue(t, ts.api, `sluice_checks_total{result="shadow_denied",zone="trial"}`); got != 1 {
		t.Errorf("shadow_denied metric %v, want 1", got)
	}
}

func TestReset(t *testing.T) {
	ts := start(t, parseConfig(t, apiConfig), Options{})
	for range 3 {
		post(t, ts.api+"/v1/check", `{"zone":"three","key":"alice"}`)
	}
	if resp, _ := post(t, ts.api+"/v1/check", `{"zone":"three","key":"alice"}`); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429 before the reset", resp.StatusCode)
	}
	if resp, raw := post(t, ts.api+"/v1/reset", `{"zone":"three","keys":["alice"]}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("reset: status %d, want 204 (%s)", resp.StatusCode, raw)
	}
	if resp, raw := post(t, ts.api+"/v1/check", `{"zone":"three","key":"alice"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("after reset: status %d, want 200 (%s)", resp.StatusCode, raw)
	}
}

func TestAPIErrors(t *testing.T) {
	ts := start(t, parseConfig(t, apiConfig), Options{})
	for _, tt := range []struct {
		name, path, body string
		status           int
		detail           string
	}{
		{"bad JSON", "/v1/check", `{"zone":`, 400, "invalid JSON body"},
		{"not an object", "/v1/check", `[1]`, 400, "invalid JSON body"},
		{"trailing data", "/v1/check", `{"zone":"three","key":"a"} {}`, 400, "after top-level value"},
		{"trailing brace", "/v1/check", `{"zone":"three","key":"a"}}`, 400, "after top-level value"},
		{"unknown field", "/v1/check", `{"zone":"three","key":"a","costs":1}`, 400, `unknown field "costs"`},
		{"missing zone", "/v1/check", `{"key":"a"}`, 400, `missing "zone"`},
		{"unknown zone", "/v1/check", `{"zone":"four","key":"a"}`, 404, `no zone named "four"`},
		{"missing key", "/v1/check", `{"zone":"three"}`, 400, `missing "key"`},
		{"key and keys", "/v1/check", `{"zone":"three","key":"a","keys":["b"]}`, 400, `not both`},
		{"empty key", "/v1/check", `{"zone":"three","keys":["a",""]}`, 400, "keys[1] is empty"},
		{"repeated key", "/v1/check", `{"zone":"three","keys":["a","a"]}`, 400, "keys[1] repeats keys[0]"},
		{"too many hits", "/v1/check", `{"zone":"two-limits","keys":["1","2","3","4","5","6","7","8","9"]}`, 400, "more than 16"},
		{"negative cost", "/v1/check", `{"zone":"three","key":"a","cost":-1}`, 400, "cost must be >= 0"},
		{"cost over rate", "/v1/check", `{"zone":"three","key":"a","cost":4}`, 400, "could never pass"},
		{"fractional cost", "/v1/check", `{"zone":"three","key":"a","cost":1.5}`, 400, "invalid JSON body"},
		{"oversized body", "/v1/check", `{"zone":"three","key":"` + strings.Repeat("x", 5000) + `"}`, 413, "larger than 4096 bytes"},
		{"reset with cost", "/v1/reset", `{"zone":"three","key":"a","cost":1}`, 400, `"cost" has no meaning`},
		{"reset unknown zone", "/v1/reset", `{"zone":"x","key":"a"}`, 404, `no zone named "x"`},
		{"unknown path", "/v2/check", `{}`, 404, "no endpoint /v2/check"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, raw := post(t, ts.api+tt.path, tt.body)
			wantProblem(t, resp, raw, tt.status, tt.detail)
		})
	}
	resp, raw := get(t, ts.api+"/v1/check", nil)
	wantProblem(t, resp, raw, http.StatusMethodNotAllowed, "accepts POST")
}

func TestHealth(t *testing.T) {
	ts := start(t, parseConfig(t, apiConfig), Options{})
	for _, path := range []string{"/healthz", "/readyz"} {
		if resp, raw := get(t, ts.api+path, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d (%s)", path, resp.StatusCode, raw)
		}
	}
}

// FuzzCheckHandler feeds arbitrary bodies to POST /v1/check: the answer
// is never a 5xx, a 4xx is always a valid problem+json of that status, and
// a 200 or 429 is a decision.
func FuzzCheckHandler(f *testing.F) {
	for _, seed := range []string{
		`{"zone":"three","key":"alice"}`,
		`{"zone":"two-limits","keys":["a","b"],"cost":0}`,
		`{"zone":"three","key":"a","cost":3}`,
		`{"zone":"three","key":"a","cost":-9223372036854775808}`,
		`{"zone":"trial","keys":[]}`,
		`{"zone":"","key":null}`,
		`{"zone":"three","key":"\u0000\ud800"}`,
		`{`, `null`, `""`, `{"zone":"three","key":"a"}{"x":1}`,
	} {
		f.Add([]byte(seed))
	}
	cfg, err := parseConfigBytes(apiConfig)
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(f.Context(), cfg, Options{})
	if err != nil {
		f.Fatal(err)
	}
	h := limitBody(s.apiHandler("api"), cfg.Listeners[0].MaxBodyBytes)
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(w, req)
		switch {
		case w.Code >= 500:
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		case w.Code == http.StatusOK || w.Code == http.StatusTooManyRequests:
			var d decision
			if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil || d.Allowed != (w.Code == http.StatusOK) {
				t.Fatalf("status %d with body %s (%v)", w.Code, w.Body, err)
			}
		case w.Code >= 400:
			var p problem
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("status %d with Content-Type %q", w.Code, ct)
			}
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != w.Code || p.Detail == "" {
				t.Fatalf("status %d with problem %s (%v)", w.Code, w.Body, err)
			}
		default:
			t.Fatalf("unexpected status %d", w.Code)
		}
	})
}
