package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// shortLimits are one limit per algorithm with windows of 200 ms to 1 s.
var shortLimits = []sluice.Limit{
	{Rate: 5, Window: 500 * time.Millisecond},
	{Rate: 5, Window: time.Second, Algorithm: sluice.Buckets, Resolution: 100 * time.Millisecond},
	{Rate: 5, Window: 300 * time.Millisecond, Algorithm: sluice.Log},
	{Rate: 5, Window: 200 * time.Millisecond, Algorithm: sluice.Decay},
	{Rate: 5, Window: time.Second, Algorithm: sluice.GCRA},
}

// maxTTL bounds the TTL a key of l may get: the longest time its usage
// takes to fall to zero (decay: from Rate to 0.01), plus a millisecond of
// rounding. A shadow hit records past the limit, so a GCRA arrival time
// can run ahead of now by more than W: by the shadow cost it recorded, at
// most another W in this traffic.
func maxTTL(l sluice.Limit) time.Duration {
	switch l.Algo() {
	case sluice.Decay:
		return time.Duration(float64(l.Window)*7.0) + time.Millisecond // ln(5/0.01) ≈ 6.2
	case sluice.Buckets:
		return l.Window + l.Bucket() + time.Millisecond
	case sluice.SlidingWindow, sluice.GCRA:
		return 2*l.Window + time.Millisecond
	}
	return l.Window + time.Millisecond
}

// traffic sends random single- and multi-hit checks (shadow ones and
// grouped ones included) on the Redis clock for a while.
func traffic(t *testing.T, s *redisstore.Store) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 600 {
		var c sluice.Check
		for j := range 1 + rng.IntN(3) {
			l := shortLimits[rng.IntN(len(shortLimits))]
			l.Shadow = rng.IntN(5) == 0
			c.Hits = append(c.Hits, sluice.Hit{Zone: fmt.Sprint("z", j), Key: fmt.Sprint("k", rng.IntN(20)), Limit: l})
		}
		if rng.IntN(4) == 0 {
			c.Group = "grp"
		}
		c.Cost = int64(rng.IntN(3))
		if c.Validate() != nil {
			continue // two hits sharing state
		}
		mustCheck(t, s, c)
		if i%100 == 0 {
			time.Sleep(20 * time.Millisecond) // spread the traffic over windows
		}
	}
}

// checkTTLs asserts that every key has a TTL, within its limit's bound
// for the windowed algorithms. (Shadow hits record beyond the rate, so a
// gcra or decay state may legitimately take longer than its window to
// empty.)
func checkTTLs(t *testing.T, c rueidis.Client, keys []string) {
	t.Helper()
	windowed := time.Duration(0)
	for _, l := range shortLimits {
		windowed = max(windowed, maxTTL(l))
	}
	for _, k := range keys {
		bound := windowed
		if strings.Contains(k, "}:g") || strings.Contains(k, "}:d") {
			bound = time.Hour
		}
		ms, err := c.Do(context.Background(), c.B().Pttl().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ms == -2:
			// expired between SCAN and PTTL
		case ms < 0:
			t.Errorf("key %q has no expiry (PTTL %d)", k, ms)
		case time.Duration(ms)*time.Millisecond > bound:
			t.Errorf("key %q: PTTL %d ms, more than the longest window state %v", k, ms, bound)
		}
	}
}

// waitGone polls count until it is zero; the deadline is the longest TTL
// plus a margin for a loaded machine.
func waitGone(t *testing.T, count func() int) {
	t.Helper()
	deadline := time.Now().Add(maxTTL(shortLimits[3]) + 5*time.Second)
	for n := count(); n > 0; n = count() {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys still there after their windows", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKeysExpireStandalone: after traffic stops, every
// key the store wrote has a TTL (SCAN + PTTL), and all are gone after their
// windows. It uses the Redis clock (no Options.Now), as production does.
func TestKeysExpireStandalone(t *testing.T) {
	srv := redistest.Standalone(t)
	s := newStore(t, srv.Client(), redisstore.Options{})
	traffic(t, s)
	keys := scanKeys(t, srv.Client(), "*")
	if len(keys) < 20 {
		t.Fatalf("only %d keys after the traffic: the test exercises nothing", len(keys))
	}
	checkTTLs(t, srv.Client(), keys)
	waitGone(t, func() int { return len(scanKeys(t, srv.Client(), "*")) })
}

func TestKeysExpireCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	s := newStore(t, c.Client(), redisstore.Options{})
	traffic(t, s) // multi-hit checks here span slots: refunds write too
	keys := clusterKeys(t, c, "*")
	if len(keys) < 20 {
		t.Fatalf("only %d keys after the traffic", len(keys))
	}
	for k, m := range keys {
		checkTTLs(t, m.Client(), []string{k})
	}
	waitGone(t, func() int { return len(clusterKeys(t, c, "*")) })
}
