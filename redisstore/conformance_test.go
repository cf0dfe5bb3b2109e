package redisstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/redisstore"
)

// testTimeout is generous: tests run under -race on a shared 2-core machine.
const testTimeout = 5 * time.Second

// factory returns a storetest.Factory making Stores on client, each with
// its own key prefix.
func factory(client rueidis.Client) storetest.Factory {
	var n atomic.Int64
	return func(t *testing.T, now func() time.Time) sluice.Limiter {
		s, err := redisstore.New(client, redisstore.Options{
			Now: now, Timeout: testTimeout,
			Prefix: fmt.Sprintf("conf%d:", n.Add(1)),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// runConformance is storetest.Run; a seam for the Sentinel test.
func runConformance(t *testing.T, f storetest.Factory) { storetest.Run(t, f) }

func TestConformanceStandalone(t *testing.T) {
	srv := redistest.Standalone(t)
	storetest.Run(t, factory(srv.Client()))
}

func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	storetest.Run(t, factory(c.Client()))
}
