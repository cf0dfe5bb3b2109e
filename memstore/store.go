package memstore

import (
	"context"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
)

// DefaultMaxKeys is the number of states a Store holds at most unless
// Options.MaxKeys says otherwise: about 120 MB of sliding-window state with
// 16-byte keys (see the package doc for memory per key).
const DefaultMaxKeys = 1_000_000

// DefaultShards is the number of independently locked tables a Store uses
// unless Options.Shards says otherwise.
const DefaultShards = 256

// minKeysPerShard keeps the default shard count low enough that each shard
// of a small store still holds a useful number of keys.
const minKeysPerShard = 256

// Options configure a Store. The zero value means defaults.
type Options struct {
	// Now reads the clock. It must be safe for concurrent use. Default: the
	// system clock, read with time.Now at most once a second and advanced
	// by Go's monotonic clock in between (see "Time" in the package doc).
	Now func() time.Time
	// MaxKeys bounds the number of (zone, key, limit) states held at once;
	// see the package doc for what happens at the bound. Must be >= 0.
	// Zero means DefaultMaxKeys (1,000,000).
	MaxKeys int
	// Shards is the number of independently locked tables, rounded up to a
	// power of two; it must not exceed MaxKeys. More shards, less lock
	// contention. Zero means DefaultShards (256), halved while a shard would
	// hold fewer than 256 keys.
	Shards int
}

// Store is the in-memory sluice.Limiter. It is safe for concurrent use and
// starts no goroutine: there is nothing to close. The zero value is a Store
// with the default Options, set up on its first use; New(Options{}) returns
// the same.
type Store struct {
	ready  atomic.Bool            // set up, by New or on first use of a zero Store
	setup  sync.Mutex             // held while a zero Store sets itself up
	now    func() time.Time       // nil: the anchored system clock
	anchor atomic.Pointer[anchor] // when now is nil
	hash   hashKeys
	shards []shard
	mask   uint64
	// The counters are written when states are dropped (a flood of new
	// keys at the bound drops one per check): apart from the fields
	// above, which every check reads, so their line is not moved between
	// the cores by those writes.
	_         [64]byte
	evictions atomic.Uint64
	expired   atomic.Uint64
}

var _ sluice.Limiter = (*Store)(nil)

// New returns an empty Store configured by opts.
func New(opts Options) (*Store, error) {
	if opts.MaxKeys < 0 {
		return nil, fmt.Errorf("memstore: %w: Options.MaxKeys must be >= 0, got %d", sluice.ErrInvalid, opts.MaxKeys)
	}
	if opts.Shards < 0 {
		return nil, fmt.Errorf("memstore: %w: Options.Shards must be >= 0, got %d", sluice.ErrInvalid, opts.Shards)
	}
	maxKeys := opts.MaxKeys
	if maxKeys == 0 {
		maxKeys = DefaultMaxKeys
	}
	n := opts.Shards
	if n == 0 {
		n = DefaultShards
		for n > 1 && maxKeys/n < minKeysPerShard {
			n /= 2
		}
	}
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	if n > maxKeys {
		return nil, fmt.Errorf("memstore: %w: Options.Shards (%d, rounded to a power of two) must not exceed MaxKeys (%d)", sluice.ErrInvalid, n, maxKeys)
	}
	s := new(Store)
	s.init(opts.Now, maxKeys, n)
	return s, nil
}

// init sets up an empty store of n shards (a power of two) holding at most
// maxKeys states, and marks it ready.
func (s *Store) init(now func() time.Time, maxKeys, n int) {
	s.now, s.hash = now, newHashKeys()
	if s.now == nil {
		s.anchor.Store(newAnchor())
	}
	s.shards = make([]shard, n)
	for i := range s.shards {
		s.shards[i].init(maxKeys / n)
	}
	s.mask = uint64(n - 1)
	s.ready.Store(true)
}

// setUp sets up a zero Store with the default options, once.
func (s *Store) setUp() {
	s.setup.Lock()
	defer s.setup.Unlock()
	if !s.ready.Load() {
		s.init(nil, DefaultMaxKeys, DefaultShards)
	}
}

// Check implements sluice.Limiter. It decides every hit of c under the locks
// of the shards holding them, taken in ascending order, so a check is atomic
// with respect to every other check and reset.
func (s *Store) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: check: %w", err)
	}
	if !s.ready.Load() {
		s.setUp()
	}
	if code, ok := commonOne(&c); ok {
		s.checkOne(&c, code, d)
		return nil
	}
	return s.checkOther(c, d)
}

// checkOther is Check for a check commonOne does not accept: validated,
// then decided by checkOne or checkMany.
func (s *Store) checkOther(c sluice.Check, d *sluice.Decision) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("memstore: check: %w", err)
	}
	if len(c.Hits) == 1 {
		s.checkOne(&c, algoCode(c.Hits[0].Limit.Algo()), d)
		return nil
	}
	s.checkMany(c, d)
	return nil
}

// checkMany is Check for a valid check of several hits, through a
// workset: a function of its own, so that the workset's kilobytes are
// not in the frame of every single-hit check.
//
//go:noinline
func (s *Store) checkMany(c sluice.Check, d *sluice.Decision) {
	now := s.micros()
	var b workset
	n := b.prepare(s, c)
	b.lock(s, now)
	b.load(s, c.Group)
	allowed, _, _ := algo.Decide(b.hits[:n], b.out[:n], now, c.Cost)
	if allowed && c.Cost > 0 {
		b.store(s, c.Group, now)
	}
	b.unlockEntries(s)
	b.unlock(s)
	fill(d, b.hits[:n], b.out[:n])
}

// commonOne reports whether c is a single-hit check of a common shape that
// Check.Validate accepts, and returns its hit's algorithm code. It never
// accepts what Validate refuses (TestCommonOneIsValid); what it does not
// accept, Validate judges. It spares the common check Validate's copies of
// the check and the hit, and a second lookup of the algorithm's name:
// without it a hot denial costs 1.26-1.34x the CPU (bench/run.sh memory).
func commonOne(c *sluice.Check) (code uint8, ok bool) {
	if len(c.Hits) != 1 {
		return 0, false
	}
	h := &c.Hits[0]
	l := &h.Limit
	if h.Key == "" || len(h.Key) > sluice.MaxKeyLen || c.Cost < 0 || c.Cost > l.Rate ||
		l.Rate <= 0 || l.Rate > sluice.MaxRate ||
		l.Window <= 0 || l.Window > sluice.MaxWindow || l.Window%time.Microsecond != 0 {
		return 0, false
	}
	// A switch on the name rather than ident.Lookup, which copies the
	// table's entry: measurably slower on this path. TestCodesAreIdent
	// and TestCommonOneIsValid hold the switch to the table.
	switch l.Algorithm {
	case "", sluice.SlidingWindow:
		return codeWindow, true
	case sluice.GCRA:
		return codeGCRA, true
	case sluice.Decay:
		return codeDecay, true
	case sluice.Log:
		return codeLog, l.Rate <= sluice.MaxLogRate
	case sluice.Buckets:
		r := l.Bucket()
		return codeBuckets, r >= time.Microsecond && r%time.Microsecond == 0 && l.Window%r == 0 && l.Window/r <= sluice.MaxBuckets
	}
	return 0, false
}

// checkOne is Check for a single valid hit whose algorithm code is code:
// one hash of the group, zone and key, one clock read, one lock, and no
// workset. The clock is read first (before the lock, as in checkMany):
// a clock read waits for the instructions before it to complete, and
// fewer are in flight at the start. Through the workset instead, a single-hit check costs 1.7-2.7x the CPU
// (bench/run.sh memory), and it is the only path that decides without
// the shard's lock.
func (s *Store) checkOne(c *sluice.Check, code uint8, d *sluice.Decision) {
	// micros, written out: it is too large for the compiler to inline,
	// and a call costs a hot check measurably.
	now, fresh := int64(0), false
	if s.now == nil {
		a := s.anchor.Load()
		since := time.Since(a.wall)
		now, fresh = a.micros+int64(since/time.Microsecond), since < anchorTTL
	}
	if !fresh {
		now = s.microsSlow()
	}
	h := &c.Hits[0]
	l := &h.Limit
	// The identity, field by field: a composite literal of this size is
	// built in a temporary and copied, a measurable share of a hot check.
	// TestIdentityIsIdent holds it to ident.State.
	var k stateKey
	k.Zone, k.Key, k.Group = h.Zone, h.Key, c.Group
	k.Limit.Code, k.Limit.Window = code, int64(l.Window/time.Microsecond)
	k.Limit.Bucket = k.Limit.Window
	if code == codeBuckets {
		k.Limit.Bucket = bucketMicros(l)
	}
	p := algo.Params{Rate: l.Rate, Window: k.Limit.Window, Bucket: k.Limit.Bucket}
	if len(c.Group)+len(h.Zone)+len(h.Key) > maxWhole {
		var sum [idSum]byte // declared here: zeroed only for long identities
		// A copy of the group: the caller's Check.Group reaching the
		// hash's interface would make the caller's Hits escape.
		digest(&sum, strings.Clone(c.Group), h.Zone, h.Key)
		k.sum = &sum
	}
	kh := s.hash.strHash(h.Key, 0) // keyHash, without its call for a key alone
	if h.Zone != "" || c.Group != "" {
		kh = s.hashMore(kh, c.Group, h.Zone)
	}
	sh, hash := &s.shards[kh&s.mask], stateHash(kh, &k)
	shadow := c.Shadow || l.Shadow
	e, seq, o, done := sh.peek(hash, &k, p, shadow, now, c.Cost)
	if done {
		fillOne(d, shadow, p.Rate, &o)
		return
	}
	weight := uint16(1)
	if e != nil {
		// A stored state: decided and recorded under its own lock,
		// without the shard's (see recordOne), but for one check in
		// sweepEvery, which takes the shard's lock and counts for
		// sweepEvery checks towards the shard's next sweep.
		var decided bool
		if decided, weight = s.recordOne(e, hash, p, shadow, &o, now, c.Cost); decided {
			fillOne(d, shadow, p.Rate, &o)
			return
		}
	}
	sh.lock()
	if s.tick(sh, now, weight) || sh.seq != seq { // else the table is as peek found it
		e = sh.find(hash, &k)
	}
	stored := e != nil
	if stored {
		e.lock()
	} else {
		e = newEntry(code)
	}
	if decideOne(e, p, shadow, &o, now, c.Cost) && c.Cost > 0 {
		s.record(sh, hash, e, stored, &k, now+o.ResetAfter, now)
	}
	if stored {
		e.unlock(!o.Allowed)
	}
	sh.unlock()
	fillOne(d, shadow, p.Rate, &o)
}

// recordOne decides a single-hit check on e, a state peek found in its
// shard's table, under e's lock alone, unless that lock is held or the
// check is the one in sweepEvery on e that goes through the shard's lock
// to keep the sweeps coming (see sampled). It reports whether it decided,
// and if not, for how many checks the locked path must count this one
// (see tick). A check on a stored state then writes no line of the
// shard's header, only e's, as a keyed limiter with a lock per key does.
// It is decideOne and record under the shard's lock, without what that
// lock is for: the table does not change (an entry leaves it only
// locked, see entry.tryLock).
func (s *Store) recordOne(e *entry, hash uint64, p algo.Params, shadow bool, o *algo.Outcome, now, cost int64) (decided bool, weight uint16) {
	es := atomic.LoadUint32(&e.seq)
	if sampled(es, hash) {
		return false, sweepEvery
	}
	if es&seqLocked != 0 || !atomic.CompareAndSwapUint32(&e.seq, es, es|seqLocked) {
		return false, 1
	}
	if e.algorithm == codeLog && cost > 0 && e.logState().WantsChunk() {
		// A log about to take a new chunk gets it outside the lock: the
		// allocation may wait for the collector, and a check waiting for
		// this lock would spin all that time (see algo.Log.WantsChunk).
		e.unlock(es&seqDenied != 0)
		c := algo.NewLogChunk()
		if !e.tryLock() {
			return false, 1
		}
		e.logState().Spare(c)
	}
	if decideOne(e, p, shadow, o, now, cost) && cost > 0 {
		e.extend(now + o.ResetAfter)
	}
	e.unlock(!o.Allowed)
	return true, 0
}

// sampled reports whether the check on a state whose entry's seq reads
// es, stored under hash, is the one in sweepEvery that recordOne sends
// through the shard's lock: seq counts the times the entry was locked, and
// the hash spreads the sampled checks of a shard's keys over the count.
func sampled(es uint32, hash uint64) bool {
	return (uint64(es>>seqCount)+hash)%sweepEvery == 0
}

// lineHits is the capacity fillOne gives a Decision's Hits: as many
// HitResults as fit in two cache lines (3 of 40 bytes, 120), which Go
// allocates in its 128-byte size class, whose objects lie at multiples of
// 128 bytes in their span and so fill two lines alone. (The 48-byte class
// that one result would get puts the results of two Decisions, often two
// callers on two cores, in one line.) TestHitsOwnLines holds it.
const lineHits = 128 / int(unsafe.Sizeof(sluice.HitResult{}))

// bucketMicros is a buckets limit's bucket length in µs.
func bucketMicros(l *sluice.Limit) int64 {
	return int64(l.Bucket() / time.Microsecond)
}

// decideOne is algo.Decide for one hit on e's state: each state's fused
// Check (Eval, then Record when allowed or shadow), on a copy for the
// states peek reads without the lock (see words). It reports whether the
// check passes this hit (allowed or shadow). e's lock must be held, or e
// not yet be in a table. The caller turns the outcome into a Decision
// with sluice.Decision.Conclude, as every store does.
func decideOne(e *entry, p algo.Params, shadow bool, o *algo.Outcome, now, cost int64) bool {
	ws := e.stateWords()
	if ws == nil {
		if e.algorithm == codeLog {
			*o = e.logState().Check(p, now, cost, shadow)
		} else {
			*o = e.bucketsState().Check(p, now, cost, shadow)
		}
		return o.Allowed || shadow
	}
	var w words
	copy(w[:], ws)
	switch e.algorithm {
	case codeGCRA:
		*o = w.gcra().Check(p, now, cost, shadow)
	case codeDecay:
		*o = w.decay().Check(p, now, cost, shadow)
	default:
		*o = w.window().Check(p, now, cost, shadow)
	}
	w.publish(e, ws)
	return o.Allowed || shadow
}

// fillOne is fill for a single hit decided by decideOne. Conclude sets
// every field of d but Hits, so d.Hits is only resized, not cleared first.
//
// A Decision without storage gets lineHits results in cache lines of
// their own (see lineHits), not Prepare's one: every check writes its
// result, and two callers' 40-byte results side by side in one line
// (Go's 48-byte size class) moved that line between the cores on every
// check of either, whatever the store did.
func fillOne(d *sluice.Decision, shadow bool, rate int64, o *algo.Outcome) {
	if cap(d.Hits) == 0 {
		d.Hits = make([]sluice.HitResult, 1, lineHits)
	}
	d.Hits = d.Hits[:1]
	r := &d.Hits[0] // field by field: a composite literal is built on the stack and copied
	r.Allowed, r.Shadow, r.Used = o.Allowed, shadow, o.Used
	r.Remaining = algo.Remaining(rate, o.Used)
	r.RetryAfter = time.Duration(o.RetryAfter) * time.Microsecond
	r.ResetAfter = time.Duration(o.ResetAfter) * time.Microsecond
	d.Conclude(sluice.FromStore)
}

// tick counts n checks on a locked shard (1, or sweepEvery for the check
// that stands for those recorded without the shard's lock, see recordOne)
// and lets it sweep every sweepEvery checks, or up to 16 times as seldom
// while its sweeps find nothing expired: a shard whose states are all
// live (the common case of a busy store) spends a sixteenth of the cache
// misses on sweeping, and a shard whose states expire is swept every 64
// checks again once a sweep meets one. See shard.sweep.
func (s *Store) tick(sh *shard, now int64, n uint16) (swept bool) {
	if sh.ops += n; sh.ops < sweepEvery<<sh.idle {
		return false
	}
	s.sweep(sh, now)
	return true
}

func (s *Store) sweep(sh *shard, now int64) {
	sh.ops = 0
	if n := sh.sweep(now); n > 0 {
		s.expired.Add(uint64(n))
		sh.idle = 0
	} else if sh.idle < maxIdle {
		sh.idle++
	}
}

// record moves e's reset deadline after an allowed check and inserts e
// under k if it was not stored yet. sh must be locked, and e too if it
// was stored.
func (s *Store) record(sh *shard, hash uint64, e *entry, stored bool, k *stateKey, deadline, now int64) {
	e.extend(deadline)
	if stored {
		return
	}
	e.setID(k)
	evicted, expired := sh.insert(hash, e, now)
	if evicted {
		s.evictions.Add(1)
	}
	if expired > 0 {
		s.expired.Add(uint64(expired))
	}
}

// fill writes a decision from the hits and outcomes of algo.Decide;
// Decision.Conclude derives the verdict from them by the same rule.
func fill(d *sluice.Decision, hits []algo.Hit, out []algo.Outcome) {
	d.Prepare(len(hits))
	for i := range hits {
		o := &out[i]
		d.Hits[i] = sluice.HitResult{
			Allowed:    o.Allowed,
			Shadow:     hits[i].Shadow,
			Used:       o.Used,
			Remaining:  algo.Remaining(hits[i].Params.Rate, o.Used),
			RetryAfter: time.Duration(o.RetryAfter) * time.Microsecond,
			ResetAfter: time.Duration(o.ResetAfter) * time.Microsecond,
		}
	}
	d.Conclude(sluice.FromStore)
}

// micros reads the clock in µs since the epoch (checkOne has it written
// out).
func (s *Store) micros() int64 {
	if s.now == nil {
		a := s.anchor.Load()
		if since := time.Since(a.wall); since < anchorTTL {
			return a.micros + int64(since/time.Microsecond)
		}
	}
	return s.microsSlow()
}

// microsSlow is micros with Options.Now, or with an anchor to renew.
func (s *Store) microsSlow() int64 {
	if s.now != nil {
		return s.now().UnixMicro()
	}
	a := newAnchor()
	s.anchor.Store(a)
	return a.micros
}

// anchorTTL is how long the default clock trusts the monotonic clock
// before reading the system clock again.
const anchorTTL = time.Second

// anchor is a reading of the system clock. Between readings the store
// advances it with the monotonic clock, which costs one clock read where
// time.Now costs two.
type anchor struct {
	wall   time.Time // with its monotonic reading
	micros int64     // wall in µs since the epoch
}

func newAnchor() *anchor {
	now := time.Now()
	return &anchor{wall: now, micros: now.UnixMicro()}
}

// Reset implements sluice.Limiter: it forgets the state of every hit of c.
// c.Cost is ignored.
func (s *Store) Reset(ctx context.Context, c sluice.Check) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: reset: %w", err)
	}
	c.Cost = 0
	if err := c.Validate(); err != nil {
		return fmt.Errorf("memstore: reset: %w", err)
	}
	if !s.ready.Load() {
		s.setUp()
	}
	var b workset
	n := b.prepare(s, c)
	b.lock(s, s.micros())
	for i := range n {
		sh := &s.shards[b.shard[i]]
		k := b.key(i, c.Group)
		if e := sh.find(b.hashes[i], &k); e != nil {
			e.lock()
			sh.remove(b.hashes[i], e)
		}
	}
	b.unlock(s)
	return nil
}

// Stats is a snapshot of a Store's counters.
type Stats struct {
	// Keys is the number of states held, including idle ones not yet
	// swept. At most Options.MaxKeys.
	Keys int
	// Evictions counts states dropped before their reset deadline because
	// their shard was full.
	Evictions uint64
	// Expired counts idle states dropped after their reset deadline.
	Expired uint64
}

// Stats returns the store's counters. It locks each shard in turn, so it is
// meant for metrics and tests, not for the hot path.
func (s *Store) Stats() Stats {
	if !s.ready.Load() {
		s.setUp()
	}
	st := Stats{Evictions: s.evictions.Load(), Expired: s.expired.Load()}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Keys += int(sh.n)
		sh.mu.Unlock()
	}
	return st
}
