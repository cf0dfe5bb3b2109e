package config

import (
	"strings"
	"testing"
)

// TestWarnings: with neither an admin listener nor an admin token, the
// warnings name every admin endpoint open to the api listeners' clients
// and every counter-changing endpoint that is off; admin.open serves the
// latter, named as open.
func TestWarnings(t *testing.T) {
	const zone = "zones: [{name: z, limits: [1r/s]}]\n"
	const twoListeners = "listeners: [{addr: 127.0.0.1:0}, {addr: 127.0.0.1:0, serve: admin}]\n"
	for _, tc := range []struct {
		name, yaml string
		token      bool
		open, off  string // the endpoints named, in order; "" for no such warning
		reset, top bool   // ServesReset, ServesTopReset
	}{
		{"defaults", zone, false, "GET /v1/top, GET /ui", "POST /v1/reset, POST /v1/top/reset", false, false},
		{"defaults, top off", zone + "top: {enabled: false}\n", false, "", "POST /v1/reset", false, false},
		{"admin.open", zone + "admin: {open: true}\n", false, "POST /v1/reset, POST /v1/top/reset, GET /v1/top, GET /ui", "", true, true},
		{"metrics admin", zone + "admin: {endpoints: [reset, metrics]}\n", false, "GET /metrics, GET /v1/top, GET /ui", "POST /v1/reset, POST /v1/top/reset", false, false},
		{"admin listener", zone + twoListeners, false, "", "", true, true},
		{"token", zone, true, "", "", true, true},
		{"reset not admin", zone + "admin: {endpoints: [check]}\n" + twoListeners, false, "", "POST /v1/reset", false, true},
		{"reset not admin, open", zone + "admin: {endpoints: [check], open: true}\n" + twoListeners, false, "POST /v1/reset", "", true, true},
		{"no api listener", zone + "listeners: [{addr: 127.0.0.1:0, serve: proxy}]\nproxy: {upstream: http://127.0.0.1:1}\n", false, "", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("s.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if tc.token {
				c.Admin.Token = strings.Repeat("t", 32)
			}
			var open, off string
			for _, w := range c.Warnings() {
				if x, ok := strings.CutPrefix(w, "open to every client of the api listeners: "); ok {
					open, _, _ = strings.Cut(x, ".")
				} else if x, ok := strings.CutPrefix(w, "off, answered 403: "); ok {
					off, _, _ = strings.Cut(x, ";")
				} else {
					t.Errorf("unexpected warning %q", w)
				}
			}
			if open != tc.open || off != tc.off {
				t.Errorf("open %q, off %q; want %q, %q (warnings %q)", open, off, tc.open, tc.off, c.Warnings())
			}
			if got := c.ServesReset(); got != tc.reset {
				t.Errorf("ServesReset() = %v, want %v", got, tc.reset)
			}
			if got := c.ServesTopReset(); got != tc.top {
				t.Errorf("ServesTopReset() = %v, want %v", got, tc.top)
			}
		})
	}
}

// TestWarningsFirstSight: first_sight loads, so that older configurations
// keep working, and is named as having no effect.
func TestWarningsFirstSight(t *testing.T) {
	c, err := Parse("s.yaml", []byte("zones: [{name: z, limits: [1r/s], mode: async, first_sight: 1}, {name: y, limits: [1r/s], mode: async}]\ntop: {enabled: false}\nadmin: {open: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range c.Warnings() {
		if strings.Contains(w, "first_sight") {
			got = append(got, w)
		}
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "zone z: first_sight has no effect") {
		t.Errorf("first_sight warnings %q, want one for zone z", got)
	}
}
