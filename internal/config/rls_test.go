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
