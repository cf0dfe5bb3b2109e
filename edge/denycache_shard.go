package edge

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// entry is one stored denial, on its shard's list in order of use.
type entry struct {
	hash       uint64
	check      sluice.Check    // a copy; Hits owned by the entry
	decision   sluice.Decision // a copy; Hits owned by the entry
	at, until  time.Time       // when the check was sent; when it may pass
	prev, next *entry
}

// shard is one independently locked part of a DenyCache: a map from hash to
// entry and a doubly linked list of the entries, most recently used first.
type shard struct {
	mu   sync.Mutex
	m    map[uint64]*entry
	head entry // sentinel: head.next is the most recent, head.prev the least
	max  int
}

func (s *shard) init(max int) {
	s.m = make(map[uint64]*entry)
	s.head.prev, s.head.next = &s.head, &s.head
	s.max = max
}

func (s *shard) unlink(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (s *shard) pushFront(e *entry) {
	e.prev, e.next = &s.head, s.head.next
	e.prev.next, e.next.prev = e, e
}

func (s *shard) remove(e *entry, dc *DenyCache) {
	s.unlink(e)
	delete(s.m, e.hash)
	dc.entries.Add(-1)
}

// lookup writes the stored denial of c to d and reports whether there was
// one still in force at now.
func (s *shard) lookup(h uint64, c *sluice.Check, now time.Time, d *sluice.Decision, dc *DenyCache) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[h]
	if e == nil || !sameCheck(&e.check, c) {
		return false
	}
	if !now.Before(e.until) {
		s.remove(e, dc)
		return false
	}
	s.unlink(e)
	s.pushFront(e)
	return e.replay(now, d)
}

// replay writes the stored decision to d as seen at now: the waits are
// shortened by the time since, and a hit whose wait has passed now allows.
// It reports false if no hit's denial may be repeated any more (see hold).
func (e *entry) replay(now time.Time, d *sluice.Decision) bool {
	elapsed := now.Sub(e.at)
	d.Prepare(len(e.decision.Hits))
	for i, r := range e.decision.Hits {
		held := !r.Allowed && elapsed < hold(e.check.Hits[i].Limit, r.RetryAfter)
		r.RetryAfter = max(0, r.RetryAfter-elapsed)
		r.ResetAfter = max(0, r.ResetAfter-elapsed)
		if !held {
			r.Allowed, r.RetryAfter = true, 0
		}
		d.Hits[i] = r
	}
	d.Conclude(sluice.FromDenyCache)
	_, denied := d.Denier()
	return denied
}

// hold returns how long after the store's decision a hit's denial with the
// given RetryAfter may be repeated. For the exact algorithms (log, gcra)
// that is RetryAfter itself. The estimating ones compute RetryAfter in
// floating point, tight to 1% (the tolerance internal/algo's tests hold them
// to): their denials are held 1% and a microsecond less, so the cache never
// outlasts the store's own denial.
func hold(l sluice.Limit, retryAfter time.Duration) time.Duration {
	switch l.Algo() {
	case sluice.Log, sluice.GCRA:
		return retryAfter
	}
	return retryAfter - retryAfter/100 - time.Microsecond
}

// holdAll returns how long the denial d of c may be repeated: until the last
// of its non-shadow denying hits may pass.
func holdAll(c *sluice.Check, d *sluice.Decision) time.Duration {
	var wait time.Duration
	for i, r := range d.Hits {
		if !r.Allowed && !r.Shadow {
			wait = max(wait, hold(c.Hits[i].Limit, r.RetryAfter))
		}
	}
	return wait
}

// insert stores the denial d of c, decided at or after at, until until,
// unless a reset has finished since gen was read.
func (s *shard) insert(h uint64, c *sluice.Check, d *sluice.Decision, at, until time.Time, gen uint64, dc *DenyCache) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if dc.gen.Load() != gen {
		return
	}
	e := s.m[h]
	switch {
	case e != nil: // the same check, or a hash collision: the newest wins
		s.unlink(e)
	case len(s.m) >= s.max:
		e = s.head.prev
		s.remove(e, dc)
		dc.evicted.Add(1)
		fallthrough
	default:
		e = &entry{hash: h}
		s.m[h] = e
		dc.entries.Add(1)
	}
	e.check = sluice.Check{
		Hits: append(e.check.Hits[:0], c.Hits...), Cost: c.Cost, Group: c.Group,
	}
	hits := e.decision.Hits[:0]
	e.decision = *d
	e.decision.Hits = append(hits, d.Hits...)
	e.at, e.until = at, until
	s.pushFront(e)
	dc.stored.Add(1)
}

// purge removes every entry with a hit in the zone and key of one of hits.
func (s *shard) purge(hits []sluice.Hit, dc *DenyCache) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.m {
		if sharesKey(e.check.Hits, hits) {
			s.remove(e, dc)
		}
	}
}

func sharesKey(a, b []sluice.Hit) bool {
	for i := range a {
		for j := range b {
			if a[i].Zone == b[j].Zone && a[i].Key == b[j].Key {
				return true
			}
		}
	}
	return false
}
