package goredis_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/goredis"
)

func factory(c redis.Scripter) storetest.Factory {
	var n atomic.Int64
	return func(t *testing.T, now func() time.Time) sluice.Limiter {
		s, err := goredis.NewStore(c, redisstore.Options{
			Now: now, Timeout: 5 * time.Second, Prefix: fmt.Sprintf("goredis%d:", n.Add(1)),
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// TestConformance runs the conformance suite through go-redis, on a
// standalone server and on a Cluster.
func TestConformance(t *testing.T) {
	t.Run("Standalone", func(t *testing.T) {
		srv := redistest.Standalone(t)
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		t.Cleanup(func() { c.Close() })
		storetest.Run(t, factory(c))
	})
	t.Run("Cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a six-node Cluster")
		}
		cl := redistest.NewCluster(t)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
		t.Cleanup(func() { c.Close() })
		storetest.Run(t, factory(c))
	})
}
