package edge

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Defaults of DenyCacheOptions.
const (
	DefaultDenyCacheEntries = 10_000
	DefaultDenyCacheMaxAge  = time.Minute
)

// maxDenyCacheShards bounds the number of independently locked parts of a
// DenyCache.
const maxDenyCacheShards = 32

// DenyCacheOptions configure a DenyCache. The zero value means defaults.
type DenyCacheOptions struct {
	// MaxEntries bounds the number of denials held. The bound is split
	// evenly between the shards, each forgetting its least recently used
	// entry when full, so a full cache holds a little fewer. Each entry
	// holds a copy of its check and decision, about 350 bytes for a one-hit
	// check (measured), and keeps its key strings alive. Must be >= 0; zero
	// means DefaultDenyCacheEntries (10,000).
	MaxEntries int
	// MaxAge is the longest a denial is repeated, however long its
	// RetryAfter: it bounds how long a Reset made through another process
	// (which this cache cannot see) goes unnoticed. Must be >= 0; zero means
	// DefaultDenyCacheMaxAge (1m).
	MaxAge time.Duration
	// Now reads the clock. It must be safe for concurrent use. Default
	// time.Now.
	Now func() time.Time
}

// DenyCacheStats is a snapshot of a DenyCache's counters. Counters only
// grow.
type DenyCacheStats struct {
	// Hits counts the checks denied from the cache, without the limiter.
	Hits uint64
	// Stored counts the denials stored; Evicted those forgotten early
	// because the cache was full.
	Stored, Evicted uint64
	// Entries is the number of denials held now, expired ones included
	// until they are next seen.
	Entries int64
}

// A DenyCache is a sluice.Limiter in front of another that remembers
// denials: after the limiter denies a check, the same check (same hits,
// cost, group and shadow flag) is denied without asking it until the
// denial's RetryAfter has passed. See the package doc for why this never
// denies a check the limiter would allow. It is safe for concurrent use and
// starts no goroutine.
type DenyCache struct {
	next   sluice.Limiter
	maxAge time.Duration
	now    func() time.Time
	seed   maphash.Seed
	shards []shard
	mask   uint64
	// gen counts the resets; a denial is stored only if no reset finished
	// while it was being decided.
	gen atomic.Uint64

	hits, stored, evicted atomic.Uint64
	entries               atomic.Int64
}

var _ sluice.Limiter = (*DenyCache)(nil)

// NewDenyCache returns an empty DenyCache in front of next, configured by
// opts.
func NewDenyCache(next sluice.Limiter, opts DenyCacheOptions) (*DenyCache, error) {
	switch {
	case next == nil:
		return nil, fmt.Errorf("edge: %w: NewDenyCache needs a limiter", sluice.ErrInvalid)
	case opts.MaxEntries < 0:
		return nil, fmt.Errorf("edge: %w: DenyCacheOptions.MaxEntries must be >= 0, got %d", sluice.ErrInvalid, opts.MaxEntries)
	case opts.MaxAge < 0:
		return nil, fmt.Errorf("edge: %w: DenyCacheOptions.MaxAge must be >= 0, got %v", sluice.ErrInvalid, opts.MaxAge)
	}
	dc := &DenyCache{next: next, maxAge: opts.MaxAge, now: opts.Now, seed: maphash.MakeSeed()}
	if dc.maxAge == 0 {
		dc.maxAge = DefaultDenyCacheMaxAge
	}
	if dc.now == nil {
		dc.now = time.Now
	}
	size := opts.MaxEntries
	if size == 0 {
		size = DefaultDenyCacheEntries
	}
	// A power of two no larger than the bound, so every shard holds one.
	n := min(maxDenyCacheShards, 1<<(bits.Len(uint(size))-1))
	dc.shards = make([]shard, n)
	for i := range dc.shards {
		// Spread the bound; the first size%n shards take one more.
		dc.shards[i].init(size/n + btoi(i < size%n))
	}
	dc.mask = uint64(n - 1)
	return dc, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Stats returns a snapshot of the cache's counters.
func (dc *DenyCache) Stats() DenyCacheStats {
	return DenyCacheStats{
		Hits: dc.hits.Load(), Stored: dc.stored.Load(), Evicted: dc.evicted.Load(),
		Entries: dc.entries.Load(),
	}
}

// Check implements sluice.Limiter. A check denied from the cache has Source
// sluice.FromDenyCache and the hit results of the stored denial, with
// RetryAfter and ResetAfter shortened by the time since. Peeks (cost 0) and
// shadow checks are always passed on. Only denials decided by the store
// itself (Source sluice.FromStore) are stored.
func (dc *DenyCache) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	cacheable := c.Cost > 0 && !c.Shadow
	var h uint64
	now := dc.now()
	if cacheable {
		h = dc.hash(&c)
		if dc.shard(h).lookup(h, &c, now, d, dc) {
			dc.hits.Add(1)
			return nil
		}
	}
	gen := dc.gen.Load()
	if err := dc.next.Check(ctx, c, d); err != nil {
		return err
	}
	if !cacheable || d.Allowed || d.Source != sluice.FromStore {
		return nil
	}
	// The limiter decided no earlier than now, so now + RetryAfter is no
	// later than the moment the check could pass.
	if wait := min(holdAll(&c, d), dc.maxAge); wait > 0 {
		dc.shard(h).insert(h, &c, d, now, now.Add(wait), gen, dc)
	}
	return nil
}

// Reset implements sluice.Limiter: it resets the hits in the limiter, then
// forgets every stored denial of a check that has a hit with the same zone
// and key as one of c's, whatever its limit (also when the limiter's reset
// failed: the state may be gone). A denial being decided while the reset
// runs is not stored.
func (dc *DenyCache) Reset(ctx context.Context, c sluice.Check) error {
	err := dc.next.Reset(ctx, c)
	// After the limiter's reset, so that no denial decided before it can
	// be stored after the purge.
	dc.gen.Add(1)
	for i := range dc.shards {
		dc.shards[i].purge(c.Hits, dc)
	}
	return err
}

func (dc *DenyCache) shard(h uint64) *shard { return &dc.shards[h&dc.mask] }

// hash returns a hash of everything that identifies c: equal checks have
// equal hashes.
func (dc *DenyCache) hash(c *sluice.Check) uint64 {
	var mh maphash.Hash
	mh.SetSeed(dc.seed)
	maphash.WriteComparable(&mh, c.Cost)
	mh.WriteString(c.Group)
	for i := range c.Hits {
		maphash.WriteComparable(&mh, c.Hits[i])
	}
	return mh.Sum64()
}

// sameCheck reports whether a and b are the same check for the cache. Shadow
// checks are never stored, so Shadow need not be compared.
func sameCheck(a, b *sluice.Check) bool {
	if a.Cost != b.Cost || a.Group != b.Group || len(a.Hits) != len(b.Hits) {
		return false
	}
	for i := range a.Hits {
		if a.Hits[i] != b.Hits[i] {
			return false
		}
	}
	return true
}
