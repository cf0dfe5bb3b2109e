package redisstore

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestNewTopology: a slot map is the master of each slot of its ranges,
// masters numbered in sorted order; a range outside the 16384 slots, upside
// down or without a master is refused.
func TestNewTopology(t *testing.T) {
	top, err := newTopology([]SlotRange{{0, 99, "b:1"}, {100, 16383, "a:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := top.masters; len(got) != 2 || got[0] != "a:1" || got[1] != "b:1" {
		t.Errorf("masters %v, want [a:1 b:1]", got)
	}
	for _, c := range []struct {
		slot uint16
		want string
	}{{0, "b:1"}, {99, "b:1"}, {100, "a:1"}, {16383, "a:1"}} {
		if got := top.masters[top.owner[c.slot]-1]; got != c.want {
			t.Errorf("slot %d on %q, want %q", c.slot, got, c.want)
		}
	}
	for _, bad := range [][]SlotRange{{{0, 16384, "a:1"}}, {{10, 9, "a:1"}}, {{0, 9, ""}}} {
		if _, err := newTopology(bad); err == nil {
			t.Errorf("newTopology(%v) accepted", bad)
		}
	}
}

// TestNodeOf: the coalescer's lane of a slot is its master in the slot
// map; one lane ("") outside a Cluster or before the map is read.
func TestNodeOf(t *testing.T) {
	s := &Store{}
	if got := s.nodeOf(5); got != "" {
		t.Errorf("outside a Cluster: %q, want \"\"", got)
	}
	s.slots = &slotMap{}
	if got := s.nodeOf(5); got != "" {
		t.Errorf("before the map is read: %q, want \"\"", got)
	}
	top, err := newTopology([]SlotRange{{0, 99, "b:1"}, {100, 16383, "a:1"}})
	if err != nil {
		t.Fatal(err)
	}
	s.slots.cur.Store(top)
	if a, b := s.nodeOf(5), s.nodeOf(16383); a != "b:1" || b != "a:1" {
		t.Errorf("nodeOf(5), nodeOf(16383) = %q, %q; want b:1, a:1", a, b)
	}
}

// BenchmarkPart is the cost Store.Part adds to every check of a Guard in
// front of a Cluster: the slot of the check's tag and a look-up in the map.
func BenchmarkPart(b *testing.B) {
	top, err := newTopology([]SlotRange{{0, 5460, "10.0.0.1:6379"}, {5461, 10922, "10.0.0.2:6379"}, {10923, 16383, "10.0.0.3:6379"}})
	if err != nil {
		b.Fatal(err)
	}
	s := &Store{cluster: true, slots: &slotMap{}}
	s.slots.cur.Store(top)
	s.slots.readAt.Store(time.Now().Add(time.Hour).UnixNano()) // no read due
	c := sluice.Check{Cost: 1, Hits: []sluice.Hit{{Zone: "api", Key: "user-1234567", Limit: sluice.Limit{Rate: 10, Window: time.Minute}}}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if s.Part(c) == "" {
				b.Fatal("no part")
			}
		}
	})
}
