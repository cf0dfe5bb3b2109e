package server

import (
	"strings"
	"testing"
)

// TestOpenResetWarning: without an admin listener or token, the server
// says at start that /v1/reset is open to every API client; with a token
// it does not.
func TestOpenResetWarning(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		warn       bool
	}{
		{"open", "listeners: [{addr: '127.0.0.1:0'}]\nzones: [{name: a, limits: 1r/s}]\n", true},
		{"admin listener", "listeners: [{addr: '127.0.0.1:0'}, {addr: '127.0.0.1:0', serve: admin}]\nzones: [{name: a, limits: 1r/s}]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := start(t, parseConfig(t, tc.yaml), Options{})
			logs := ts.logs.String()
			if got := strings.Contains(logs, "level=WARN") && strings.Contains(logs, "POST /v1/reset is open"); got != tc.warn {
				t.Errorf("open-reset warning logged: %v, want %v; logs:\n%s", got, tc.warn, logs)
			}
		})
	}
}
