package openresty

import (
	"context"
	"fmt"
	"strings"
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
	runSentinelChange(t, s, func() *redistest.Server { return s.Failover() })
}

// TestSentinelSwitchover: SENTINEL FAILOVER demotes a live master (the
// Sentinel closes its clients and makes it a replica) and promotes its
// replica. A worker that knew the old master finds it answering ROLE as
// a replica on its next connection, asks the Sentinel again and goes on
// on the new master, exactly.
func TestSentinelSwitchover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two redis-server and a redis-sentinel process and switches masters")
	}
	s := redistest.NewSentinel(t, 1)
	runSentinelChange(t, s, func() *redistest.Server { return switchover(t, s) })
}

// switchover asks the Sentinel for a manual failover and waits (up to 60
// s) until it names the replica as master, the replica has the master role
// and the old master the replica role. It returns the new master.
func switchover(t *testing.T, s *redistest.Sentinel) *redistest.Server {
	t.Helper()
	old := s.CurrentMaster()
	next := s.Replica
	if old == s.Replica {
		next = s.Master
	}
	if n, err := old.Do("WAIT", "1", "5000").AsInt64(); err != nil || n < 1 {
		t.Fatalf("WAIT on the master: %d replicas acknowledged (%v)", n, err)
	}
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	// The Sentinel learns of the replica from the master's INFO, which it
	// reads every 10 s: until then it answers NOGOODSLAVE. Ask again
	// until it knows one, within the deadline.
	for {
		err := s.Sentinels[0].Do("SENTINEL", "FAILOVER", redistest.MasterName).Error()
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "NOGOODSLAVE") {
			t.Fatalf("SENTINEL FAILOVER: %v", err)
		}
		select {
		case <-deadline:
			t.Fatalf("SENTINEL FAILOVER for 60 s: %v", err)
		case <-tick.C:
		}
	}
	for {
		if s.CurrentMaster() == next && role(next) == "master" && role(old) == "slave" {
			return next
		}
		select {
		case <-deadline:
			t.Fatalf("no switchover after 60 s: the Sentinel names %s, roles %s %s", s.CurrentMaster().Addr(), role(old), role(next))
		case <-tick.C:
		}
	}
}

// role returns the first field of srv's ROLE reply, or "" on an error.
func role(srv *redistest.Server) string {
	v, err := srv.Do("ROLE").ToArray()
	if err != nil || len(v) == 0 {
		return ""
	}
	r, _ := v[0].ToString()
	return r
}

// runSentinelChange spends a key through nginx on the Sentinel's master,
// changes the master with change, spends it further and requires the
// limit exact over the change, read the same by a Go store.
func runSentinelChange(t *testing.T, s *redistest.Sentinel, change func() *redistest.Server) {
	n := startNginx(t, 2, harnessConf(t, ""))
	lua := &luaLimiter{url: n.url, redis: s.URL(), prefix: "sent:", timeout: 500, client: newHTTPClient()}
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
	next := change()
	if next == old {
		t.Fatalf("the master is still %s after the failover", old.Addr())
	}
	after := spend(2 * rate)
	if before+after != rate {
		t.Errorf("admitted %d before and %d after the change, want %d in all", before, after, rate)
	}
	// The workers learnt the new master from the Sentinels (they log it).
	if want := "names " + next.Addr() + " as master of " + redistest.MasterName; !strings.Contains(n.Log(), want) {
		t.Errorf("nginx's error log does not say %q", want)
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
