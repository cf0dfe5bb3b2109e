package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/goredis"
)

var partLimit = sluice.Limit{Rate: 1000, Window: time.Hour}

// waitMasters waits until s's slot map names n masters.
func waitMasters(t *testing.T, s *redisstore.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.Parts()) != n {
		s.Part(hit("", "any", partLimit)) // starts a read when one is due
		if time.Now().After(deadline) {
			t.Fatalf("the store's slot map names %v, want %d masters", s.Parts(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPartNamesMaster: in a Cluster, Store.Part names the master that
// CLUSTER SLOTS gives for the slot of a check's tag (its key, or its
// group), through rueidis and through go-redis; a check across masters,
// and any check outside a Cluster, has no part.
func TestPartNamesMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster")
	}
	c := redistest.NewCluster(t)
	gr := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { gr.Close() })
	gs, err := goredis.NewStore(gr, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gs.Close() })
	stores := map[string]*redisstore.Store{"rueidis": dialStore(t, c.URL(), redisstore.Options{}), "go-redis": gs}
	owners := c.SlotMasters()
	var masters []string
	for _, m := range c.Masters() {
		masters = append(masters, m.Addr())
	}
	slices.Sort(masters)
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			waitMasters(t, s, 3)
			if got := s.Parts(); !slices.Equal(got, masters) {
				t.Errorf("Parts() = %v, want %v", got, masters)
			}
			seen := map[string]bool{}
			for i := range 2000 {
				key := fmt.Sprint("key-", i)
				want := owners[redistest.Slot(key)]
				if got := s.Part(hit("z", key, partLimit)); got != want {
					t.Fatalf("Part(%q) = %q, want %q (slot %d)", key, got, want, redistest.Slot(key))
				}
				seen[want] = true
				group := fmt.Sprint("group-", i)
				grouped := sluice.Check{Group: group, Cost: 1, Hits: []sluice.Hit{{Key: "a", Limit: partLimit}, {Key: key, Limit: partLimit}}}
				if got, want := s.Part(grouped), owners[redistest.Slot(group)]; got != want {
					t.Fatalf("Part of a check of group %q = %q, want %q", group, got, want)
				}
			}
			if len(seen) != 3 {
				t.Errorf("2,000 keys on %d masters, want 3", len(seen))
			}
			a, b := "key-0", "key-1"
			for i := 2; owners[redistest.Slot(a)] == owners[redistest.Slot(b)]; i++ {
				b = fmt.Sprint("key-", i)
			}
			across := sluice.Check{Cost: 1, Hits: []sluice.Hit{{Key: a, Limit: partLimit}, {Key: b, Limit: partLimit}}}
			if got := s.Part(across); got != "" {
				t.Errorf("Part of a check on two masters = %q, want \"\"", got)
			}
		})
	}
	standalone := dialStore(t, redistest.Standalone(t).URL(), redisstore.Options{})
	mustCheck(t, standalone, hit("z", "k", partLimit))
	if got, parts := standalone.Part(hit("z", "k", partLimit)), standalone.Parts(); got != "" || parts != nil {
		t.Errorf("standalone: Part %q, Parts %v; want none", got, parts)
	}
}

// TestPartFollowsFailover: after a master is killed and its replica
// promoted, checks of its keys make the store read the slot map again,
// and Part names the promoted replica; the failed master leaves Parts.
func TestPartFollowsFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Cluster and fails one master over")
	}
	c := redistest.NewCluster(t)
	s := dialStore(t, c.URL(), redisstore.Options{Timeout: 50 * time.Millisecond})
	waitMasters(t, s, 3)
	ck := hit("z", "moving", partLimit)
	old := s.Part(ck)
	if want := c.MasterOf("moving").Addr(); old != want {
		t.Fatalf("Part before the failover = %q, want %q", old, want)
	}
	c.KillMaster("moving")
	promoted := c.MasterOf("moving").Addr()
	deadline := time.Now().Add(10 * time.Second)
	for s.Part(ck) != promoted {
		if time.Now().After(deadline) {
			t.Fatalf("Part after the failover = %q, want the promoted %q", s.Part(ck), promoted)
		}
		var d sluice.Decision
		s.Check(context.Background(), ck, &d) // fails while the client routes to the dead master
		time.Sleep(10 * time.Millisecond)
	}
	if parts := s.Parts(); slices.Contains(parts, old) || !slices.Contains(parts, promoted) || len(parts) != 3 {
		t.Errorf("Parts after the failover = %v, want 3 masters with %s and without %s", parts, promoted, old)
	}
}
