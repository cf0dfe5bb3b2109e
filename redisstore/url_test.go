package redisstore

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url  string
		want connURL
	}{
		{"redis://localhost", connURL{mode: "standalone", hosts: []string{"localhost:6379"}}},
		{"redis://:s3cret@10.0.0.1:6380/2", connURL{mode: "standalone", password: "s3cret", hosts: []string{"10.0.0.1:6380"}, db: 2}},
		{"redis://s3cret@h:1", connURL{mode: "standalone", password: "s3cret", hosts: []string{"h:1"}}},
		{"rediss://app:p%40ss:w@h:6380", connURL{tls: true, mode: "standalone", user: "app", password: "p@ss:w", hosts: []string{"h:6380"}}},
		{"redis://[::1]:7000", connURL{mode: "standalone", hosts: []string{"[::1]:7000"}}},
		{"redis-sentinel://s1:26379,s2/mymaster", connURL{mode: "sentinel", hosts: []string{"s1:26379", "s2:26379"}, master: "mymaster"}},
		{"redis-sentinel://:pw@s1/m/3?sentinel_password=x", connURL{mode: "sentinel", password: "pw", hosts: []string{"s1:26379"}, master: "m", db: 3}},
		{"rediss-cluster://a:7000,b:7001,c", connURL{tls: true, mode: "cluster", hosts: []string{"a:7000", "b:7001", "c:6379"}}},
		{"redis-cluster://a:7000/", connURL{mode: "cluster", hosts: []string{"a:7000"}}},
	}
	for _, tt := range tests {
		got, err := parseURL(tt.url)
		if err != nil {
			t.Errorf("parseURL(%q): %v", tt.url, err)
			continue
		}
		if got.tls != tt.want.tls || got.mode != tt.want.mode || got.user != tt.want.user || got.password != tt.want.password ||
			!slices.Equal(got.hosts, tt.want.hosts) || got.master != tt.want.master || got.db != tt.want.db {
			t.Errorf("parseURL(%q) = %+v, want %+v", tt.url, got, tt.want)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, raw := range []string{
		"", "localhost:6379", "http://h", "redis://", "redis://h:0", "redis://h:port", "redis://a,b",
		"redis://h/x", "redis://h/1/2", "redis-sentinel://s1", "redis-sentinel://s1/", "redis-cluster://a/1",
		"redis://h?db=1", "redis://h?sentinel_password=x", "redis://:topsecret@h:99999", "redis://:%zz@h",
	} {
		_, err := parseURL(raw)
		if !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("parseURL(%q) = %v, want ErrInvalid", raw, err)
			continue
		}
		if strings.Contains(err.Error(), "topsecret") {
			t.Errorf("parseURL(%q): error %q shows the password", raw, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://h:1":                "redis://h:1",
		"redis://:pw@h:1/2":          "redis://:xxxxx@h:1/2",
		"redis://user:pw@h":          "redis://user:xxxxx@h",
		"redis://pw@h":               "redis://xxxxx@h",
		"redis-sentinel://u:p@a,b/m": "redis-sentinel://u:xxxxx@a,b/m",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}
