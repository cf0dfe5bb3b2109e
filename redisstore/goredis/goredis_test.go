package goredis_test

import (
	"errors"
	"fmt"
	"strings"
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

// TestRingRefused: a *redis.Ring over two real servers is refused with
// ErrInvalid. Accepted, it split a key's state: after a two-hit check used
// up "ip-1"'s 3r/h on the shard of its first key, a one-hit check of
// "ip-1", run on "ip-1"'s own shard, was still allowed.
func TestRingRefused(t *testing.T) {
	a, b := redistest.Standalone(t), redistest.Standalone(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { ring.Close() })
	if _, err := goredis.NewStore(ring, redisstore.Options{}); !errors.Is(err, sluice.ErrInvalid) || !strings.Contains(err.Error(), "Ring") {
		t.Errorf("NewStore(ring) = %v, want ErrInvalid naming the Ring", err)
	}
	if _, err := goredis.New(ring); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("New(ring) = %v, want ErrInvalid", err)
	}
	if _, err := goredis.New(nil); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
}
