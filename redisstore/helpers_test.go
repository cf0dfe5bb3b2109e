package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// newStore returns a Store on client with opts (Timeout defaulted to
// testTimeout), closed at the end of the test.
func newStore(t *testing.T, client rueidis.Client, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	return scripterStore(t, redisstore.NewScripter(client), opts)
}

// scripterStore is newStore on a Scripter.
func scripterStore(t *testing.T, sc redisstore.Scripter, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	s, err := redisstore.NewWithScripter(sc, opts)
	if err != nil {
		t.Fatalf("redisstore.NewWithScripter: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// dialStore is newStore on a connection to url, which Close closes.
func dialStore(t *testing.T, url string, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	s, err := redisstore.Dial(url, opts)
	if err != nil {
		t.Fatalf("redisstore.Dial: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mustCheck runs c and fails the test on an error.
func mustCheck(t *testing.T, l sluice.Limiter, c sluice.Check) sluice.Decision {
	t.Helper()
	var d sluice.Decision
	if err := l.Check(context.Background(), c, &d); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return d
}

// hit is a one-hit check of cost 1.
func hit(zone, key string, l sluice.Limit) sluice.Check {
	return sluice.Check{Hits: []sluice.Hit{{Zone: zone, Key: key, Limit: l}}, Cost: 1}
}

// scanKeys returns every key of one server matching pattern, by SCAN.
func scanKeys(t *testing.T, c rueidis.Client, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	cursor := uint64(0)
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatalf("SCAN: %v", err)
		}
		keys = append(keys, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			return keys
		}
	}
}

// clusterKeys returns every key matching pattern on the Cluster's masters.
func clusterKeys(t *testing.T, c *redistest.Cluster, pattern string) map[string]*redistest.Server {
	t.Helper()
	keys := map[string]*redistest.Server{}
	for _, m := range c.Masters() {
		for _, k := range scanKeys(t, m.Client(), pattern) {
			keys[k] = m
		}
	}
	return keys
}

// fixedClock is a clock for tests that do not move it.
func fixedClock(at time.Time) func() time.Time { return func() time.Time { return at } }
