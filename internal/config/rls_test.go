package config

import (
	"strings"
	"testing"
)

func TestRLSSection(t *testing.T) {
	c, err := Parse("s.yaml", []byte("rls: {config_dir: /etc/ratelimit/config, response_headers: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.RLS.ResponseHeaders || len(c.Zones) != 0 {
		t.Errorf("RLS %+v, %d zones; want headers on and no zones required", c.RLS, len(c.Zones))
	}
	var roles []string
	for _, l := range c.Listeners {
		roles = append(roles, string(l.Serve)+"@"+l.Addr)
	}
	if got := strings.Join(roles, " "); got != "api@127.0.0.1:8080 grpc@127.0.0.1:8081" {
		t.Errorf("listeners %s, want the default api and grpc listeners", got)
	}
	_, err = Parse("s.yaml", []byte("listeners: [{addr: 127.0.0.1:0, serve: grpc}]\nzones: [{name: z, limits: [1r/s]}]\n"))
	if err == nil || !strings.Contains(err.Error(), "rls.config_dir is not set") {
		t.Errorf("grpc without rls.config_dir: err %v", err)
	}
	c, err = Parse("s.yaml", []byte("zones: [{name: z, limits: [1r/s]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Override(Overrides{RLSConfigDir: "/d", GRPCListen: "127.0.0.1:9000"}); err != nil {
		t.Fatal(err)
	}
	if c.RLS.ConfigDir != "/d" || c.Listeners[len(c.Listeners)-1].Addr != "127.0.0.1:9000" || c.Listeners[len(c.Listeners)-1].Serve != GRPC {
		t.Errorf("overrides: %+v %+v", c.RLS, c.Listeners)
	}
}

// TestImplicitGRPCListenerCollision: docs/server.md's admin listener on
// 127.0.0.1:8081 and rls.config_dir without a grpc listener. The problem
// must name the listener the user wrote and the implicit grpc listener,
// not a listeners[2] that is in no file.
func TestImplicitGRPCListenerCollision(t *testing.T) {
	_, err := Parse("s.yaml", []byte("listeners:\n  - {addr: 127.0.0.1:8080, serve: api}\n  - {addr: 127.0.0.1:8081, serve: admin}\nrls: {config_dir: /d}\n"))
	if err == nil {
		t.Fatal("admin listener on the implicit grpc address: no error")
	}
	msg := err.Error()
	if strings.Contains(msg, "listeners[2]") || !strings.Contains(msg, "listeners[1].addr") || !strings.Contains(msg, "grpc listener") || !strings.Contains(msg, "rls.config_dir") {
		t.Errorf("error %q: want it to name listeners[1].addr and the grpc listener rls.config_dir adds, not listeners[2]", msg)
	}
	// A grpc listener of one's own, elsewhere, is the fix.
	if _, err := Parse("s.yaml", []byte("listeners:\n  - {addr: 127.0.0.1:8081, serve: admin}\n  - {addr: 127.0.0.1:9081, serve: grpc}\nrls: {config_dir: /d}\n")); err != nil {
		t.Errorf("with a grpc listener of its own: %v", err)
	}
}
