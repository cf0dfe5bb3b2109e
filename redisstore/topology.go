package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
)

// slotCount is the number of Redis Cluster hash slots.
const slotCount = 16384

// How often a Store in a Cluster reads the slot map again: at most every
// topologyRetry after a call failed (until the failed master's replica is
// promoted, the map still names it), and at least every topologyMaxAge
// while checks come (resharding moves slots without failing calls). An idle
// Store reads nothing.
const (
	topologyRetry  = 100 * time.Millisecond
	topologyMaxAge = 5 * time.Second
)

// A SlotMapper is a Scripter on a Redis Cluster that can read which master
// serves each hash slot. A Store whose Scripter is one names, for each
// check, the master that decides it (Store.Part), so that a failure
// breaker keeps one state per master. The rueidis Scripter and the
// go-redis one (package redisstore/goredis) implement it. Implementations
// must be safe for concurrent use.
type SlotMapper interface {
	// ClusterSlots returns the slot ranges of the Cluster and the address
	// of the master serving each, as CLUSTER SLOTS replies.
	ClusterSlots(ctx context.Context) ([]SlotRange, error)
}

// SlotRange is a range of Redis Cluster hash slots and the master that
// serves them.
type SlotRange struct {
	// First and Last bound the range; both are in it.
	First, Last uint16
	// Master is the address (host:port) of the master serving the range.
	Master string
}

// topology is a Cluster's slot map as the Store last read it: 32 KiB
// whatever the number of keys.
type topology struct {
	owner   [slotCount]uint16 // 1 + index into masters; 0: no master known
	masters []string          // sorted
	ranges  []SlotRange       // as read, to tell a changed map from the same
}

// newTopology builds the map of ranges. A range outside the slots is an
// error: the reply is not a slot map.
func newTopology(ranges []SlotRange) (*topology, error) {
	t := &topology{ranges: ranges}
	for _, r := range ranges {
		if r.First > r.Last || r.Last >= slotCount || r.Master == "" {
			return nil, fmt.Errorf("bad slot range %d-%d on %q", r.First, r.Last, r.Master)
		}
		if !slices.Contains(t.masters, r.Master) {
			t.masters = append(t.masters, r.Master)
		}
	}
	slices.Sort(t.masters)
	for _, r := range ranges {
		i := uint16(slices.Index(t.masters, r.Master)) + 1
		for sl := int(r.First); sl <= int(r.Last); sl++ {
			t.owner[sl] = i
		}
	}
	return t, nil
}

// slotMap keeps a Store's topology up to date. It starts no goroutine of
// its own: a check that finds the map old or marked stale starts one
// refresh, and the checks meanwhile use the map they have.
type slotMap struct {
	mapper  SlotMapper
	timeout time.Duration
	log     *slog.Logger

	cur    atomic.Pointer[topology]
	readAt atomic.Int64 // when the last refresh began, ns since the epoch
	stale  atomic.Bool  // a call failed since the last refresh began
	busy   atomic.Bool  // a refresh is under way
}

// get returns the current topology, or nil before the first is read, and
// starts a refresh when one is due.
func (m *slotMap) get() *topology {
	now := time.Now().UnixNano()
	age := time.Duration(now - m.readAt.Load())
	if (age >= topologyMaxAge || m.stale.Load() && age >= topologyRetry) && m.busy.CompareAndSwap(false, true) {
		m.readAt.Store(now)
		m.stale.Store(false)
		go m.refresh()
	}
	return m.cur.Load()
}

// failed marks the map stale after a call failed: a failover may have
// moved slots to a replica.
func (m *slotMap) failed() {
	if !m.stale.Load() {
		m.stale.Store(true)
	}
}

// refresh reads the slot map once. A failure keeps the map it had: the
// next due check tries again.
func (m *slotMap) refresh() {
	defer m.busy.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	ranges, err := m.mapper.ClusterSlots(ctx)
	if err != nil {
		m.stale.Store(true)
		m.log.Debug("redisstore: cluster slot map not read", "error", err.Error())
		return
	}
	if old := m.cur.Load(); old != nil && slices.Equal(old.ranges, ranges) {
		return
	}
	t, err := newTopology(ranges)
	if err != nil {
		m.log.Warn("redisstore: cluster slot map not used", "error", err.Error())
		return
	}
	m.cur.Store(t)
}

// Part names the Cluster master that decides c (its address, host:port),
// from the slot map the Store last read, for a breaker that keeps one state
// per master (it implements edge.Partitioner). It returns "" outside a
// Cluster, before the map is known, and for a check whose hits live on
// several masters. It is safe for concurrent use.
func (s *Store) Part(c sluice.Check) string {
	if s.slots == nil || len(c.Hits) == 0 {
		return ""
	}
	t := s.slots.get()
	if t == nil {
		return ""
	}
	var owner uint16
	for i, h := range c.Hits {
		if i > 0 && c.Group != "" {
			break // every hit has the group's tag
		}
		o := t.owner[slot(tagOf(h, c.Group))]
		if o == 0 || i > 0 && o != owner {
			return ""
		}
		owner = o
	}
	return t.masters[owner-1]
}

// Parts returns the addresses of the Cluster's masters, as the Store last
// read them (none outside a Cluster or before the map is known). It is
// safe for concurrent use.
func (s *Store) Parts() []string {
	if s.slots == nil {
		return nil
	}
	t := s.slots.cur.Load()
	if t == nil {
		return nil
	}
	return slices.Clone(t.masters)
}

// nodeOf returns the master of slot in the Store's slot map, or "" outside
// a Cluster or while the map does not know it.
func (s *Store) nodeOf(slot uint16) string {
	if s.slots == nil {
		return ""
	}
	t := s.slots.cur.Load()
	if t == nil || t.owner[slot] == 0 {
		return ""
	}
	return t.masters[t.owner[slot]-1]
}

// tagOf returns the hash tag of hit h's key in a check of group (see
// stateKey).
func tagOf(h sluice.Hit, group string) string {
	if group != "" {
		return encodePart(group)
	}
	return encodePart(h.Key)
}

// ClusterSlots implements SlotMapper: CLUSTER SLOTS, asked of the client's
// nodes in random order until one answers (a failed master does not).
func (r rueidisScripter) ClusterSlots(ctx context.Context) ([]SlotRange, error) {
	nodes := r.c.Nodes()
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	err := fmt.Errorf("no node known")
	for _, addr := range addrs {
		n := nodes[addr]
		var msgs []rueidis.RedisMessage
		if msgs, err = n.Do(ctx, n.B().ClusterSlots().Build()).ToArray(); err == nil {
			return parseClusterSlots(msgs, addr)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

// parseClusterSlots decodes a CLUSTER SLOTS reply of the node at addr.
// A master announced without a host (Redis replies "" or "?" when it does
// not know its own address) is named by addr's host.
func parseClusterSlots(entries []rueidis.RedisMessage, addr string) ([]SlotRange, error) {
	ranges := make([]SlotRange, 0, len(entries))
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: bad entry")
		}
		first, err1 := f[0].AsInt64()
		last, err2 := f[1].AsInt64()
		m, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(m) < 2 || first < 0 || last >= slotCount {
			return nil, fmt.Errorf("CLUSTER SLOTS: bad entry")
		}
		host, err1 := m[0].ToString()
		port, err2 := m[1].AsInt64()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("CLUSTER SLOTS: bad master")
		}
		if host == "" || host == "?" {
			host, _, _ = net.SplitHostPort(addr)
		}
		ranges = append(ranges, SlotRange{First: uint16(first), Last: uint16(last), Master: net.JoinHostPort(host, strconv.FormatInt(port, 10))})
	}
	slices.SortFunc(ranges, func(a, b SlotRange) int { return int(a.First) - int(b.First) })
	return ranges, nil
}
