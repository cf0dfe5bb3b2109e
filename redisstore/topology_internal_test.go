package redisstore

import "testing"

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

// TestSameNode: a timed-out call fails the queued checks of its own
// master: of the slots its master serves in the map, of every slot
// before the map is known or outside a Cluster.
func TestSameNode(t *testing.T) {
	s := &Store{}
	if same := s.sameNode(5); !same(5) || !same(9000) {
		t.Error("outside a Cluster, every slot is on the same node")
	}
	s.slots = &slotMap{}
	if same := s.sameNode(5); !same(9000) {
		t.Error("before the map is read, every slot counts as the same node")
	}
	top, err := newTopology([]SlotRange{{0, 99, "b:1"}, {100, 16383, "a:1"}})
	if err != nil {
		t.Fatal(err)
	}
	s.slots.cur.Store(top)
	same := s.sameNode(5)
	if !same(99) || same(100) || same(16383) {
		t.Errorf("slot 5's node: same(99) %v, same(100) %v, same(16383) %v; want true, false, false", same(99), same(100), same(16383))
	}
}
