package config

import (
	"strings"
	"testing"
)

// TestWarnings: reset is open to every API client unless an admin
// listener or an admin token protects it.
func TestWarnings(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		open       bool
	}{
		{"no admin", "zones: [{name: z, limits: [1r/s]}]\n", true},
		{"reset not admin", "zones: [{name: z, limits: [1r/s]}]\nadmin: {endpoints: [check]}\nlisteners: [{addr: 127.0.0.1:0}, {addr: 127.0.0.1:0, serve: admin}]\n", true},
		{"admin listener", "zones: [{name: z, limits: [1r/s]}]\nlisteners: [{addr: 127.0.0.1:0}, {addr: 127.0.0.1:0, serve: admin}]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("s.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(c.Warnings(), "\n")
			if open := strings.Contains(got, "/v1/reset"); open != tc.open {
				t.Errorf("Warnings() = %q; want a /v1/reset warning: %v", got, tc.open)
			}
		})
	}
	c, err := Parse("s.yaml", []byte("zones: [{name: z, limits: [1r/s]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Admin.Token = strings.Repeat("t", 32)
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("with a token: Warnings() = %q, want none", w)
	}
}
