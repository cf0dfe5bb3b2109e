package server

import (
	"net/url"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
)

// TestStoreURLEscapesPassword: a password with URL delimiters survives the
// trip through the URL the Redis store parses.
func TestStoreURLEscapesPassword(t *testing.T) {
	const password = "p@ss/w:rd?#%"
	for _, tc := range []struct {
		cfg  config.Store
		host string
	}{
		{config.Store{Kind: config.Sentinel, SentinelAddrs: []string{"127.0.0.1:26379"}, SentinelMaster: "mymaster", Password: password}, "127.0.0.1:26379"},
		{config.Store{Kind: config.Cluster, ClusterSeeds: []string{"127.0.0.1:7000"}, Password: password}, "127.0.0.1:7000"},
	} {
		u, err := url.Parse(storeURL(tc.cfg))
		if err != nil {
			t.Fatalf("%s: %v", tc.cfg.Kind, err)
		}
		if got, _ := u.User.Password(); got != password || u.Host != tc.host {
			t.Errorf("%s: password %q host %q, want %q and %q", tc.cfg.Kind, got, u.Host, password, tc.host)
		}
	}
}
