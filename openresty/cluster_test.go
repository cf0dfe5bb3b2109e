package openresty

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestClusterSlotMigration moves the slot of a key from one master to
// another while nginx keeps its slot map: during the migration the old
// master answers ASK (the module retries on the new one after ASKING),
// after it MOVED (the module updates its map). The limit stays exact
// throughout: 5 of 9 checks admitted, the state moved with the slot. It
// then fails over the new master: the module finds the promoted replica.
func TestClusterSlotMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	n := startNginx(t, 1, harnessConf(t, ""))
	l := &luaLimiter{url: n.url, redis: c.URL(), prefix: "mig:", client: newHTTPClient()}
	const key = "migrating"
	stateKey := "mig:{" + key + "}:L3600000000"
	slot := redistest.Slot(stateKey)
	if slot != redistest.Slot(key) {
		t.Fatal("the state key is not hashed on the key")
	}
	limit := sluice.Limit{Rate: 5, Window: time.Hour, Algorithm: sluice.Log}
	chk := sluice.Check{Hits: []sluice.Hit{{Key: key, Limit: limit}}, Cost: 1}
	admitted := 0
	check := func(stage string) {
		t.Helper()
		var d sluice.Decision
		if err := l.Check(context.Background(), chk, &d); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if d.Allowed {
			admitted++
		}
	}
	check("before")
	check("before")
	src := c.MasterOf(stateKey)
	var dst *redistest.Server
	for _, m := range c.Masters() {
		if m.Addr() != src.Addr() {
			dst = m
			break
		}
	}
	id := func(s *redistest.Server) string {
		v, err := s.Do("CLUSTER", "MYID").ToString()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	srcID, dstID := id(src), id(dst)
	sl := strconv.Itoa(int(slot))
	must := func(s *redistest.Server, args ...string) {
		t.Helper()
		if err := s.Do(args...).Error(); err != nil {
			t.Fatalf("%s %v: %v", s.Addr(), args, err)
		}
	}
	must(dst, "CLUSTER", "SETSLOT", sl, "IMPORTING", srcID)
	must(src, "CLUSTER", "SETSLOT", sl, "MIGRATING", dstID)
	host, port, _ := strings.Cut(dst.Addr(), ":")
	must(src, "MIGRATE", host, port, "", "0", "5000", "KEYS", stateKey)
	check("during (ASK)")
	check("during (ASK)")
	for _, m := range c.Masters() {
		must(m, "CLUSTER", "SETSLOT", sl, "NODE", dstID)
	}
	check("after (MOVED)")
	check("after (MOVED)")
	if exists, _ := dst.Do("EXISTS", stateKey).AsInt64(); exists != 1 {
		t.Fatalf("the state is not on the new master")
	}
	c.WaitHealthy()
	c.KillMaster(stateKey)
	for i := range 3 {
		check(fmt.Sprint("after failover ", i))
	}
	if admitted != 5 {
		t.Fatalf("admitted %d of 9 on 5r/h across a slot migration and a failover, want 5", admitted)
	}
}
