package edge

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Defaults of DenyCacheOptions.
const (
	DefaultDenyCacheBytes  = 4 << 20
	DefaultDenyCacheMaxAge = time.Minute
)

// minDenyCacheBytes is the smallest MaxBytes: room for one set of slots and
// a few denials.
const minDenyCacheBytes = 4 << 10

// DenyCacheOptions configure a DenyCache. The zero value means defaults.
type DenyCacheOptions struct {
	// MaxBytes bounds the heap the cache holds, in bytes: its table of
	// slots (8 bytes each, one slot per 128 bytes of MaxBytes) and the
	// denials stored in it. A denial keeps a 128-bit fingerprint of its
	// check and the decision's fixed-size results, never the check's
	// strings: 128 bytes for a one-hit check, 56 more per extra hit
	// (rounded up to the allocator's 16 bytes), whatever the length of its
	// keys (TestDenyCacheMemoryPerEntry measures it). When full, the cache forgets denials
	// not used since its clock hand last passed (CLOCK, second chance).
	// Must be 0 or >= 4096; zero means DefaultDenyCacheBytes (4 MiB, about
	// 30,000 one-hit denials).
	MaxBytes int64
	// MaxAge is the longest a denial is repeated, however long its
	// RetryAfter: it bounds how long a Reset made through another process
	// (which this cache cannot see) goes unnoticed. Must be >= 0; zero means
	// DefaultDenyCacheMaxAge (1m).
	MaxAge time.Duration
	// Now reads the clock, once per check. It must be safe for concurrent
	// use. Default time.Now.
	Now func() time.Time
}

// DenyCacheStats is a snapshot of a DenyCache's counters. Counters only
// grow.
type DenyCacheStats struct {
	// Hits counts the checks denied from the cache, without the limiter.
	Hits uint64
	// Stored counts the denials stored; Evicted those forgotten before
	// they expired because the cache was full.
	Stored, Evicted uint64
	// Entries is the number of denials held now, expired ones included
	// until their slot is reused.
	Entries int64
	// Bytes is the heap the cache holds now (table and denials), at most
	// DenyCacheOptions.MaxBytes.
	Bytes int64
}

// A DenyCache is a sluice.Limiter in front of another that remembers
// denials: after the limiter denies a check, the same check (same hits,
// cost, group and shadow flag) is denied without asking it until the
// denial's RetryAfter has passed. See the package doc for why this never
// denies a check the limiter would allow. It is safe for concurrent use and
// starts no goroutine. A cache hit takes no lock and allocates nothing.
// When a denial expires, one caller per check asks the limiter again and
// the others wait for its answer; while a call is under way, hits now and
// then yield their processor (runtime.Gosched), so that callers checking
// in a loop do not keep the call's reply from running. Make one with
// NewDenyCache: the zero value has no limiter, and its Check and Reset
// return an error wrapping sluice.ErrInvalid.
type DenyCache struct {
	next   sluice.Limiter
	maxAge time.Duration
	now    func() time.Time // nil: the monotonic clock
	base   time.Time        // instants are stored as nanoseconds since base
	secret secret

	// slots is read without a lock; mu serializes the writers (inserts,
	// purges) and guards hand and setHands.
	slots    []atomic.Pointer[denial]
	setMask  uint64
	mu       sync.Mutex
	hand     int     // the clock hand over all slots, for the byte bound
	setHands []uint8 // one per set, for the choice of a slot in the set
	budget   int64   // bytes for denials: MaxBytes less the table
	bytes    atomic.Int64

	// gen counts the resets; a denial is stored only if no reset finished
	// while it was being decided.
	gen atomic.Uint64

	// asking holds, for each expired denial being asked of the limiter
	// again, the channel its waiting callers wait on. Its size is bounded
	// by the callers under way.
	amu    sync.Mutex
	asking map[fingerprint]chan struct{}

	// calls counts the store calls under way; while there is one, a hit
	// yields its processor (see yield).
	calls atomic.Int64

	hits, stored, evicted, unstored atomic.Uint64
	entries                         atomic.Int64
}

var _ sluice.Limiter = (*DenyCache)(nil)

// NewDenyCache returns an empty DenyCache in front of next, configured by
// opts.
func NewDenyCache(next sluice.Limiter, opts DenyCacheOptions) (*DenyCache, error) {
	switch {
	case next == nil:
		return nil, fmt.Errorf("edge: %w: NewDenyCache needs a limiter", sluice.ErrInvalid)
	case opts.MaxBytes != 0 && opts.MaxBytes < minDenyCacheBytes:
		return nil, fmt.Errorf("edge: %w: DenyCacheOptions.MaxBytes must be 0 or >= %d, got %d", sluice.ErrInvalid, minDenyCacheBytes, opts.MaxBytes)
	case opts.MaxAge < 0:
		return nil, fmt.Errorf("edge: %w: DenyCacheOptions.MaxAge must be >= 0, got %v", sluice.ErrInvalid, opts.MaxAge)
	}
	dc := &DenyCache{next: next, maxAge: opts.MaxAge, now: opts.Now, secret: newSecret()}
	if dc.maxAge == 0 {
		dc.maxAge = DefaultDenyCacheMaxAge
	}
	if dc.now != nil {
		dc.base = dc.now()
	} else {
		dc.base = time.Now() // read with time.Since: the monotonic clock alone
	}
	size := opts.MaxBytes
	if size == 0 {
		size = DefaultDenyCacheBytes
	}
	// One slot per 128 bytes, a power of two: a one-hit denial takes 128.
	n := 1 << (bits.Len64(uint64(size/128)) - 1)
	dc.slots = make([]atomic.Pointer[denial], n)
	dc.setMask = uint64(n/ways - 1)
	dc.setHands = make([]uint8, n/ways)
	dc.budget = size - int64(n)*slotBytes - int64(n/ways)
	return dc, nil
}

// Stats returns a snapshot of the cache's counters.
func (dc *DenyCache) Stats() DenyCacheStats {
	return DenyCacheStats{
		Hits: dc.hits.Load(), Stored: dc.stored.Load(), Evicted: dc.evicted.Load(),
		Entries: dc.entries.Load(),
		Bytes:   dc.bytes.Load() + int64(len(dc.slots))*slotBytes + int64(len(dc.setHands)),
	}
}

// Check implements sluice.Limiter. A check denied from the cache has Source
// sluice.FromDenyCache and the hit results of the stored denial, with
// RetryAfter and ResetAfter shortened by the time since. Peeks (cost 0) and
// shadow checks are always passed on. Only denials decided by the store
// itself (Source sluice.FromStore) are stored. It reads the clock once and
// each key once.
func (dc *DenyCache) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	cacheable := c.Cost > 0 && !c.Shadow && len(c.Hits) <= sluice.MaxHits
	var (
		fp   fingerprint
		keys [sluice.MaxHits]uint64
	)
	if dc.next == nil {
		return fmt.Errorf("edge: %w: a DenyCache is made by NewDenyCache", sluice.ErrInvalid)
	}
	now := dc.clock()
	if cacheable {
		fp = fingerprintOf(&dc.secret, &c, &keys)
		e := dc.lookup(fp)
		if dc.repeat(e, now, d) {
			dc.yield()
			return nil
		}
		// The check's denial has expired: one caller asks the limiter
		// about it, the others wait for its answer, so that the callers of
		// a hot check do not all go to the store at once when its denial
		// expires. A denial in the answer is repeated to the waiters;
		// after an allowed answer, each asks the limiter itself, as
		// without the cache.
		if e != nil {
			if done, asker := dc.join(fp); asker {
				defer dc.leave(fp, done)
			} else {
				select {
				case <-done:
				case <-ctx.Done():
					return fmt.Errorf("edge: deny cache: waiting for the store's answer: %w", ctx.Err())
				}
				if dc.repeat(dc.lookup(fp), dc.clock(), d) {
					return nil
				}
			}
		}
	}
	gen := dc.gen.Load()
	dc.calls.Add(1)
	err := dc.next.Check(ctx, c, d)
	dc.calls.Add(-1)
	if err != nil {
		return err
	}
	if !cacheable || d.Allowed || d.Source != sluice.FromStore || len(d.Hits) != len(c.Hits) {
		return nil
	}
	// The limiter decided no earlier than now, so now + RetryAfter is no
	// later than the moment the check could pass.
	if wait := min(holdAll(&c, d), dc.maxAge); wait > 0 {
		e := &denial{fp: fp, at: now, until: now + int64(wait), hits: make([]deniedHit, len(c.Hits))}
		for i := range e.hits {
			e.hits[i] = deniedHit{key: keys[i], hold: hold(c.Hits[i].Limit, d.Hits[i].RetryAfter), result: d.Hits[i]}
		}
		dc.insert(e, gen, now)
	}
	return nil
}

// repeat writes the denial e, if it stands at now, to d and reports
// whether it did.
func (dc *DenyCache) repeat(e *denial, now int64, d *sluice.Decision) bool {
	if e == nil || now >= e.until {
		return false
	}
	if !e.ref.Load() {
		e.ref.Store(true) // written once per pass of the hand, not per hit
	}
	if !e.replay(now, d) {
		return false
	}
	dc.hits.Add(1)
	return true
}

// yield lets other goroutines run after some hits while a store call of
// the cache is under way. A hit takes no lock and does no I/O, so callers
// that check in a loop (a load generator, a batch job) keep their
// processor until the runtime preempts them, every 10 ms; the goroutines
// that carry a store call's reply (the client's reader, readied by the
// network poller, then the caller that asked) queue behind all of them.
// With 64 such callers on 2 processors they can wait longer than the
// store's 50 ms timeout to run, so the one caller asking about an
// expired denial fails (docs/failure.md, "Callers that spin on hits"). While a call is under way, one hit in yieldEvery gives up its
// processor, so a readied goroutine waits for a few hits of each spinning
// caller, not for their time slices; when no call is under way a hit
// costs one atomic load more.
func (dc *DenyCache) yield() {
	if dc.calls.Load() > 0 && rand.N(yieldEvery) == 0 {
		runtime.Gosched()
	}
}

// yieldEvery: while a store call is under way, one hit in yieldEvery
// yields. Yielding on every hit cost up to 1.9x the CPU per decision of
// no yield (runtime.Gosched takes the scheduler's lock), 1 in 8 a median
// 1.12x, and both kept the reply's goroutines within tens of ms of being
// readied (runtime traces of BenchmarkHotKeys/denycache, against 0.4-1 s
// without yielding; docs/failure.md).
const yieldEvery = 8

// join returns the channel closed when the check of fp being asked of the
// limiter is answered, and whether the caller is the one to ask (it then
// calls leave).
func (dc *DenyCache) join(fp fingerprint) (done chan struct{}, asker bool) {
	dc.amu.Lock()
	defer dc.amu.Unlock()
	if done = dc.asking[fp]; done != nil {
		return done, false
	}
	if dc.asking == nil {
		dc.asking = make(map[fingerprint]chan struct{})
	}
	done = make(chan struct{})
	dc.asking[fp] = done
	return done, true
}

// leave ends the asking of fp, waking those waiting for it, and lets them
// run: the caller goes back to its own work (often more hits, which yield
// only while a store call is under way), and the callers it woke would
// otherwise wait for it to be preempted.
func (dc *DenyCache) leave(fp fingerprint, done chan struct{}) {
	dc.amu.Lock()
	delete(dc.asking, fp)
	dc.amu.Unlock()
	close(done)
	runtime.Gosched()
}

// clock returns the time since the cache's base, in nanoseconds. Without
// DenyCacheOptions.Now it reads only the monotonic clock, half the cost of
// time.Now, which also reads the wall clock.
func (dc *DenyCache) clock() int64 {
	if dc.now == nil {
		return int64(time.Since(dc.base))
	}
	return int64(dc.now().Sub(dc.base))
}

// Reset implements sluice.Limiter: it resets the hits in the limiter, then
// forgets every stored denial of a check that has a hit with the same zone
// and key as one of c's, whatever its limit (also when the limiter's reset
// failed: the state may be gone). A denial being decided while the reset
// runs is not stored.
func (dc *DenyCache) Reset(ctx context.Context, c sluice.Check) error {
	if dc.next == nil {
		return fmt.Errorf("edge: %w: a DenyCache is made by NewDenyCache", sluice.ErrInvalid)
	}
	err := dc.next.Reset(ctx, c)
	// After the limiter's reset, so that no denial decided before it can
	// be stored after the purge.
	dc.Forget(c)
	return err
}

// Forget drops every stored denial of a check that has a hit with the zone
// and key of one of c's hits, without resetting anything in the limiter:
// for a reset made past the cache (through another path to the same
// store), so that the cache does not go on denying what the store now
// allows. Call it after that reset. Safe for concurrent use.
func (dc *DenyCache) Forget(c sluice.Check) {
	dc.gen.Add(1)
	keys := make([]uint64, len(c.Hits))
	for i, h := range c.Hits {
		keys[i] = keyDigest(&dc.secret, h.Zone, h.Key)
	}
	dc.purge(keys)
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
