package openresty

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// TestSentinelFailover: the module finds the master through three real
// redis-sentinel processes, and when the master is killed and the
// Sentinels promote its replica, nginx's workers (which hold pooled
// connections to the dead master) find the new one and go on deciding,
// without an error, with the state the replica holds: the admitted total
// over the failover is exactly the limit, and a Go store on the same
// Sentinels agrees. The failover is bounded by redistest's Sentinel
// timeout (60 s).
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two redis-server and three redis-sentinel processes and fails over")
	}
	s := redistest.NewSentinel(t, 3)
	n := startNginx(t, 2, harnessConf(t, ""))
	lua := &luaLimiter{url: n.URL, redis: s.URL(), prefix: "sent:", timeout: 500, client: newHTTPClient()}
	const rate = 40
	limit := sluice.Limit{Rate: rate, Window: 24 * time.Hour, Algorithm: sluice.Log}
	c := sluice.Check{Hits: []sluice.Hit{{Zone: "z", Key: "hot", Limit: limit}}, Cost: 1}
	ctx := context.Background()
	spend := func(count int) (admitted int) {
		t.Helper()
		for range count {
			var d sluice.Decision
			if err := lua.Check(ctx, c, &d); err != nil {
				t.Fatalf("check through nginx: %v", err)
			}
			if d.Allowed {
				admitted++
			}
		}
		return admitted
	}
	// Enough checks that both workers hold a pooled connection.
	before := spend(15)
	if before != 15 {
		t.Fatalf("before the failover: admitted %d of 15", before)
	}
	old := s.CurrentMaster()
	next := s.Failover()
	if next == old {
		t.Fatalf("the master is still %s after the failover", old.Addr())
	}
	after := spend(2 * rate)
	if before+after != rate {
		t.Errorf("admitted %d before and %d after the failover, want %d in all", before, after, rate)
	}
	// The new master holds the state, and a Go store on the Sentinels
	// reads the same: the key is full.
	store, err := redisstore.Dial(s.URL(), redisstore.Options{Prefix: "sent:", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var d sluice.Decision
	peek := c
	peek.Cost = 0
	if err := store.Check(ctx, peek, &d); err != nil {
		t.Fatal(err)
	}
	if used := d.Hits[0].Used; used != rate {
		t.Errorf("the Go store through the Sentinels reads %v used, want %d", used, rate)
	}
	if n, err := next.Do("EXISTS", fmt.Sprintf("sent:z{hot}:L%d", (24*time.Hour).Microseconds())).AsInt64(); err != nil || n != 1 {
		t.Errorf("the key on the new master %s: EXISTS %d (%v), want 1", next.Addr(), n, err)
	}
}
