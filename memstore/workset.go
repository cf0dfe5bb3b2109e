package memstore

import (
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/ident"
)

// workset is one check's working set, sized for sluice.MaxHits so that it
// lives on the stack.
type workset struct {
	n       int
	zones   [sluice.MaxHits]string
	keys    [sluice.MaxHits]string
	algos   [sluice.MaxHits]uint8 // algorithm code of hit i
	hashes  [sluice.MaxHits]uint64
	shard   [sluice.MaxHits]uint32 // shard of hit i
	order   [sluice.MaxHits]uint32 // distinct shards, ascending
	nlocked int
	entries [sluice.MaxHits]*entry
	stored  [sluice.MaxHits]bool        // entries[i] is in its shard
	locked  [sluice.MaxHits]bool        // this check holds entries[i]'s lock
	sums    [sluice.MaxHits][idSum]byte // digest of hit i's identity, if long
	hits    [sluice.MaxHits]algo.Hit
	out     [sluice.MaxHits]algo.Outcome
}

// prepare fills the keys, parameters and shards of c's hits (c is valid)
// and returns their number.
func (b *workset) prepare(s *Store, c sluice.Check) int {
	b.n, b.nlocked = len(c.Hits), 0
	for i, h := range c.Hits {
		l := h.Limit
		b.zones[i], b.keys[i] = h.Zone, h.Key
		b.algos[i] = algoCode(l.Algo())
		b.hits[i] = algo.Hit{
			Params: algo.Params{Rate: l.Rate, Window: l.Window.Microseconds(), Bucket: l.Bucket().Microseconds()},
			Shadow: c.Shadow || l.Shadow,
		}
		kh := s.keyHash(c.Group, h.Zone, h.Key)
		b.shard[i] = uint32(kh & s.mask)
		if len(c.Group)+len(h.Zone)+len(h.Key) > maxWhole {
			// A copy of the group: c.Group itself reaching the hash's
			// interface would make every caller's Hits escape.
			digest(&b.sums[i], strings.Clone(c.Group), h.Zone, h.Key)
		}
		k := b.key(i, c.Group)
		b.hashes[i] = stateHash(kh, &k)
		b.addShard(b.shard[i])
	}
	return b.n
}

// key returns hit i's identity in group (the check's), built on the fly
// rather than kept: a workset is zeroed for every check, so the smaller the
// better. (Holding c.Hits or c.Group would make every caller's Hits
// escape: b.hits reach algo.Decide's interfaces.)
func (b *workset) key(i int, group string) stateKey {
	p := &b.hits[i].Params
	k := stateKey{State: ident.State{Zone: b.zones[i], Key: b.keys[i], Group: group, Limit: ident.Limit{Code: b.algos[i], Window: p.Window, Bucket: p.Bucket}}}
	if len(k.Group)+len(k.Zone)+len(k.Key) > maxWhole {
		k.sum = &b.sums[i]
	}
	return k
}

// addShard inserts sh into the sorted distinct shards of order, unless it
// is there already.
func (b *workset) addShard(sh uint32) {
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
func (b *workset) lock(s *Store, now int64) {
	for _, i := range b.order[:b.nlocked] {
		sh := &s.shards[i]
		sh.lock()
		s.tick(sh, now, 1)
	}
}

func (b *workset) unlock(s *Store) {
	for _, i := range b.order[:b.nlocked] {
		s.shards[i].unlock()
	}
}

// load finds each hit's state, and takes its lock (once per state: two
// hits may share one), or makes an empty one that store will keep if the
// check records. A state peek reads is decided on a copy (see words),
// which publish writes back. Shards must be locked.
func (b *workset) load(s *Store, group string) {
	for i := range b.n {
		k := b.key(i, group)
		e := s.shards[b.shard[i]].find(b.hashes[i], &k)
		b.stored[i], b.locked[i] = e != nil, false
		if e == nil {
			e = newEntry(b.algos[i])
		} else if j := slices.Index(b.entries[:i], e); j >= 0 {
			b.entries[i] = e
			b.hits[i].State = b.hits[j].State
			continue
		} else {
			e.lock()
			b.locked[i] = true
		}
		b.entries[i] = e
		if ws := e.stateWords(); ws != nil {
			w := b.copy(s, i)
			copy(w[:], ws)
			b.hits[i].State = w.state(e.algorithm)
		} else {
			b.hits[i].State = e.state()
		}
	}
}

// copy returns where hit i's state is copied to: in the scratch of the
// hit's shard, which the check holds. Shards must be locked.
func (b *workset) copy(s *Store, i int) *words {
	sh := &s.shards[b.shard[i]]
	if sh.scratch == nil {
		sh.scratch = new([sluice.MaxHits]words)
	}
	return &sh.scratch[i]
}

// unlockEntries writes back the copies load made and releases the
// entries' locks it took, each with its hit's outcome as the denied hint.
func (b *workset) unlockEntries(s *Store) {
	for i := range b.n {
		if b.locked[i] {
			e := b.entries[i]
			if ws := e.stateWords(); ws != nil {
				b.copy(s, i).publish(e, ws)
			}
			e.unlock(!b.out[i].Allowed)
		}
	}
}

// store records the new reset deadlines after an allowed check and inserts
// the states that were new. Shards must be locked.
func (b *workset) store(s *Store, group string, now int64) {
	for i := range b.n {
		k := b.key(i, group)
		if ws := b.entries[i].stateWords(); !b.stored[i] && ws != nil {
			copy(ws, b.copy(s, i)[:]) // no reader sees e before insert
		}
		s.record(&s.shards[b.shard[i]], b.hashes[i], b.entries[i], b.stored[i], &k, now+b.out[i].ResetAfter, now)
	}
}

// The algorithms' codes (ident.Algo.Code) that memstore switches on to
// reach each algorithm's state inside an entry (see newEntry);
// TestCodesAreIdent holds them to the table.
const (
	codeWindow  byte = 'w'
	codeBuckets byte = 'b'
	codeLog     byte = 'l'
	codeDecay   byte = 'd'
	codeGCRA    byte = 'g'
)

// algoCode returns the code of a valid algorithm.
func algoCode(a sluice.Algorithm) byte {
	al, _ := ident.Lookup(string(a))
	return al.Code
}
