package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/keyname"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestNoKeysInLogsOrErrors performs an attack: with Redis
// down, checks, resets, auth requests and proxied requests whose key is a
// credential go through every failure policy. Neither a log line (at debug
// level) nor an error response carries the key; the logs name it by its
// digest. (A /v1/check decision body lists the keys its caller sent.)
func TestNoKeysInLogsOrErrors(t *testing.T) {
	const secret = "sk_live_51Hx9QpLkZ3vYt8"
	key := "Bearer " + secret
	r := redistest.Standalone(t)
	up := newUpstream(t)
	ts := start(t, parseConfig(t, `
store: {url: "`+r.URL()+`", timeout: 100ms}
admin: {open: true}
listeners:
  - {addr: "127.0.0.1:0"}
  - {addr: "127.0.0.1:0", serve: proxy}
zones:
  - {name: open, limits: 2r/m, key: "header:Authorization"}
  - {name: closed, limits: 5r/m, failure: closed, key: "header:Authorization"}
  - {name: local, limits: 5r/m, failure: local, key: "header:Authorization"}
proxy:
  upstream: `+up.URL+`
  rules: [{path_prefix: /, zones: [closed]}]
`), Options{})
	r.Kill()
	var responses []string
	record := func(resp *http.Response, body []byte) {
		if resp.Header.Get("Content-Type") == "application/json" {
			body = nil // a decision echoes the keys its caller sent
		}
		responses = append(responses, fmt.Sprintf("%d %v %s", resp.StatusCode, resp.Header, body))
	}
	for range 3 { // enough failures to open the breaker too
		for _, zone := range []string{"open", "closed", "local"} {
			record(post(t, ts.api+"/v1/check", `{"zone":"`+zone+`","key":"`+key+`"}`))
			record(post(t, ts.api+"/v1/check", `{"zone":"`+zone+`","keys":["`+key+`","`+key+`x"]}`))
			record(post(t, ts.api+"/v1/reset", `{"zone":"`+zone+`","key":"`+key+`"}`))
			record(get(t, ts.api+"/v1/auth?zone="+zone, map[string]string{"Authorization": key}))
		}
		record(get(t, ts.proxy+"/x", map[string]string{"Authorization": key}))
	}
	record(post(t, ts.api+"/v1/check", `{"zone":"open","keys":["`+key+`","`+key+`"]}`))
	var statuses []string
	for _, resp := range responses {
		statuses = append(statuses, resp[:3])
		if strings.Contains(resp, secret) {
			t.Errorf("a response carries the key: %s", resp)
		}
	}
	if !strings.Contains(strings.Join(statuses, " "), "503") {
		t.Errorf("statuses %v: want a 503 (the reset) among them, or the test proves nothing", statuses)
	}
	logs := ts.logs.String()
	if strings.Contains(logs, secret) {
		t.Errorf("the logs carry the key:\n%s", logs)
	}
	if name := keyname.Of(key); !strings.Contains(logs, name) {
		t.Errorf("the logs do not name the key by its digest %s:\n%s", name, logs)
	}
	resp, err := client.Get(ts.api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if m, _ := io.ReadAll(resp.Body); strings.Contains(string(m), secret) {
		t.Errorf("/metrics carries the key")
	}
}
