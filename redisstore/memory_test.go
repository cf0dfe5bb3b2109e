package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestMemoryPerKey measures the Redis memory of one tracked key per
// algorithm, two ways: MEMORY USAGE of a key (SAMPLES 0: every element),
// and the growth of INFO's used_memory over 300 keys, divided by 300 (this
// includes Redis's per-key dictionary and expiry entries). Keys are
// realistic: zone "api", an IPv4 address as the key, 100r/d (so that no
// key expires on a slow machine), each key checked twice. It fails if
// sliding-window exceeds its goal of 150 bytes. The bench module's
// BenchmarkRedisMemory measures the same over 100,000 keys, beside the
// peers: this test is the fast guard (about a second).
func TestMemoryPerKey(t *testing.T) {
	srv := redistest.Standalone(t)
	s := newStore(t, srv.Client(), redisstore.Options{})
	const keys, checks = 300, 2
	var table strings.Builder
	fmt.Fprintf(&table, "%-15s %14s %18s\n", "algorithm", "MEMORY USAGE", "used_memory/key")
	// The first pass warms Redis up (script cache, dictionary sizes,
	// client buffers); the second is measured.
	for pass, a := range append(slices.Clone(sluice.Algorithms()), sluice.Algorithms()...) {
		l := sluice.Limit{Rate: 100, Window: 24 * time.Hour, Algorithm: a}
		if err := srv.Do("FLUSHALL").Error(); err != nil {
			t.Fatal(err)
		}
		before := usedMemory(t, srv)
		for i := range keys {
			ip := fmt.Sprintf("203.0.%d.%d", i/256, i%256)
			for range checks {
				mustCheck(t, s, hit("api", ip, l))
			}
		}
		perKey := float64(usedMemory(t, srv)-before) / keys
		sample := scanKeys(t, srv.Client(), "sluice:api{203.0.1.1}*")
		if len(sample) != 1 {
			t.Fatalf("%s: %d keys for one address, want 1", a, len(sample))
		}
		usage, err := srv.Do("MEMORY", "USAGE", sample[0], "SAMPLES", "0").AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if pass < len(sluice.Algorithms()) {
			continue
		}
		fmt.Fprintf(&table, "%-15s %14d %18.0f\n", a, usage, perKey)
		if a == sluice.SlidingWindow && usage > 150 {
			t.Errorf("sliding-window key %q uses %d bytes, goal <= 150", sample[0], usage)
		}
	}
	t.Logf("memory per tracked key (2 checks of 100r/d each, key like sluice:api{203.0.1.1}:W86400000000):\n%s", table.String())
}

func usedMemory(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	info, err := srv.Client().Do(context.Background(), srv.Client().B().Info().Section("memory").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}
