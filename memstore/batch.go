package memstore

import (
	"hash/maphash"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
)

// stateKey identifies one state: the fields by which two sluice.Hits share
// state. It is comparable, so a lookup with the caller's strings does not
// allocate.
type stateKey struct {
	zone, key string
	window    int64 // µs
	bucket    int64 // µs
	algorithm uint8 // index in sluice.Algorithms
}

// batch is one check's working set, sized for sluice.MaxHits so that it
// lives on the stack.
type batch struct {
	n       int
	keys    [sluice.MaxHits]stateKey
	algos   [sluice.MaxHits]sluice.Algorithm
	shard   [sluice.MaxHits]uint32 // shard of hit i
	order   [sluice.MaxHits]uint32 // distinct shards, ascending
	nlocked int
	entries [sluice.MaxHits]*entry // nil: the hit's state is not stored yet
	hits    [sluice.MaxHits]algo.Hit
	out     [sluice.MaxHits]algo.Outcome
}

// prepare fills the keys, parameters and shards of c's hits (c is valid)
// and returns their number.
func (b *batch) prepare(s *Store, c sluice.Check) int {
	b.n = len(c.Hits)
	for i, h := range c.Hits {
		l := h.Limit
		b.algos[i] = l.Algo()
		b.keys[i] = stateKey{
			zone:      h.Zone,
			key:       h.Key,
			window:    l.Window.Microseconds(),
			bucket:    l.Bucket().Microseconds(),
			algorithm: algoCode(b.algos[i]),
		}
		b.hits[i] = algo.Hit{
			Params: algo.Params{Rate: l.Rate, Window: b.keys[i].window, Bucket: b.keys[i].bucket},
			Shadow: c.Shadow || l.Shadow,
		}
		b.shard[i] = s.shardOf(h.Zone, h.Key)
		b.addShard(b.shard[i], i)
	}
	return b.n
}

// addShard inserts sh into the first i sorted distinct shards of order,
// unless it is there already.
func (b *batch) addShard(sh uint32, i int) {
	if i == 0 {
		b.nlocked = 0
	}
	j := b.nlocked
	for j > 0 && b.order[j-1] > sh {
		j--
	}
	if j > 0 && b.order[j-1] == sh {
		return
	}
	copy(b.order[j+1:b.nlocked+1], b.order[j:b.nlocked])
	b.order[j] = sh
	b.nlocked++
}

// lock locks the check's shards in ascending order, so that two checks
// never wait for each other in a cycle, and lets each shard sweep a little.
func (b *batch) lock(s *Store, now int64) {
	for _, i := range b.order[:b.nlocked] {
		sh := &s.shards[i]
		sh.mu.Lock()
		if n := sh.tick(now); n > 0 {
			s.expired.Add(uint64(n))
		}
	}
}

func (b *batch) unlock(s *Store) {
	for _, i := range b.order[:b.nlocked] {
		s.shards[i].mu.Unlock()
	}
}

// load finds each hit's state, or makes an empty one that store will keep
// if the check records. Shards must be locked.
func (b *batch) load(s *Store) {
	for i := range b.n {
		e := s.shards[b.shard[i]].m[b.keys[i]]
		b.entries[i] = e
		if e != nil {
			b.hits[i].State = e.state
		} else {
			b.hits[i].State = algo.New(string(b.algos[i]))
		}
	}
}

// store records the new reset deadlines after an allowed check and inserts
// the states that were new. Shards must be locked.
func (b *batch) store(s *Store, now int64) {
	for i := range b.n {
		deadline := now + b.out[i].ResetAfter
		if e := b.entries[i]; e != nil {
			e.expires = max(e.expires, deadline)
			continue
		}
		k := b.keys[i]
		k.zone, k.key = cloneKey(k.zone, k.key)
		sh := &s.shards[b.shard[i]]
		evicted, expired := sh.insert(k, &entry{state: b.hits[i].State, expires: deadline}, now)
		if evicted {
			s.evictions.Add(1)
		}
		if expired > 0 {
			s.expired.Add(uint64(expired))
		}
	}
}

// cloneKey copies zone and key into one allocation, so that a stored state
// does not pin the caller's (possibly much larger) buffers.
func cloneKey(zone, key string) (string, string) {
	if zone == "" {
		return "", strings.Clone(key)
	}
	both := zone + key // a new string: neither operand is empty
	return both[:len(zone)], both[len(zone):]
}

// shardOf returns the shard holding the states of key in zone. All limits
// of one key share a shard, so a multi-limit check on one key takes one
// lock.
func (s *Store) shardOf(zone, key string) uint32 {
	h := maphash.String(s.seed, key)
	if zone != "" {
		h = h*0x9E3779B97F4A7C15 ^ maphash.String(s.seed, zone)
	}
	return uint32(h & s.mask)
}

func algoCode(a sluice.Algorithm) uint8 {
	switch a {
	case sluice.Buckets:
		return 1
	case sluice.Log:
		return 2
	case sluice.Decay:
		return 3
	case sluice.GCRA:
		return 4
	}
	return 0
}
