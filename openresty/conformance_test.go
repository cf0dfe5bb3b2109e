package openresty

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
)

// factory returns a storetest.Factory of limiters decided by the module in
// n, on the Redis at redisURL, each with its own key prefix.
func factory(n *nginx, redisURL string) storetest.Factory {
	var seq atomic.Int64
	client := newHTTPClient()
	return func(t *testing.T, now func() time.Time) sluice.Limiter {
		return &luaLimiter{url: n.url, redis: redisURL, prefix: fmt.Sprintf("lua%d:", seq.Add(1)), now: now, client: client}
	}
}

// TestConformanceStandalone runs the conformance suite of every sluice
// store through nginx: each check is decided by the module's Lua against
// a standalone Redis.
func TestConformanceStandalone(t *testing.T) {
	srv := redistest.Standalone(t)
	n := startNginx(t, 1, harnessConf(t, ""))
	storetest.Run(t, factory(n, srv.URL()))
}

// TestConformanceCluster is the suite on a Cluster of three masters and
// three replicas, with two nginx workers keeping slot maps of their own.
func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	n := startNginx(t, 2, harnessConf(t, ""))
	storetest.Run(t, factory(n, c.URL()))
}
