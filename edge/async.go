package edge

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ident"
)

// Defaults of AsyncOptions.
const (
	// DefaultSyncInterval is how often pending cost is sent: a hot key
	// costs the store one call per interval and process, and the
	// over-admission bound grows with it.
	DefaultSyncInterval = 100 * time.Millisecond
	// DefaultFlushers is the number of flusher goroutines.
	DefaultFlushers = 16
	// DefaultAsyncMaxKeys bounds the keys an Async limiter tracks.
	DefaultAsyncMaxKeys = 100_000
	// DefaultAsyncMaxBytes bounds the bytes of the keys it tracks.
	DefaultAsyncMaxBytes = 64 << 20
	// DefaultMaxViewAge is the age past which a view is not used.
	DefaultMaxViewAge = time.Minute
	// DefaultFlushTimeout bounds one flush call.
	DefaultFlushTimeout = time.Second
)

// slotOverhead is a tracked key's bytes besides its strings (MaxBytes).
const slotOverhead = 400

// AsyncOptions configure an Async limiter. The zero value means defaults.
type AsyncOptions struct {
	// SyncInterval is how often each key's pending cost is sent to the
	// store, and its view refreshed from the reply; a key is sent at once
	// when its unsent cost reaches half of what its view says remains. A
	// hit whose window is not longer than SyncInterval is decided by the
	// store synchronously: its cost, sent a round later, could fall in the
	// next window. Must be >= 0; zero means DefaultSyncInterval (100ms).
	SyncInterval time.Duration
	// Processes is the number of processes sharing the store's keys: each
	// admits locally, between two replies, at most its share (rounded
	// down) of what remained at the last reply; the store decides what
	// does not fit. With Processes at least the fleet's size the shares
	// add up to at most what remained. Must be >= 0; zero means 1.
	Processes int
	// Flushers is the most store calls a flush round has in flight at
	// once. While checks of this limiter wait on the store, a round has
	// one call in flight, so that flushes do not delay those checks. Must
	// be >= 0; zero means DefaultFlushers (16).
	Flushers int
	// MaxKeys bounds the keys tracked; a key that finds the table full is
	// decided by the store (AsyncStats.Overflow). Must be >= 0; zero means
	// DefaultAsyncMaxKeys (100,000).
	MaxKeys int
	// MaxBytes bounds the bytes of the tracked keys' strings plus 400 per
	// key, and of the marks of keys seen (up to 16 bytes per key of
	// MaxKeys).
	// Must be >= 0; zero means DefaultAsyncMaxBytes (64 MiB).
	MaxBytes int64
	// MaxViewAge is the age past which a key's view is not used: its
	// checks go to the store (while it fails, to its failure policy) until
	// a reply refreshes it. A key idle for longer, owing nothing, is
	// forgotten. Must be >= 0; zero means DefaultMaxViewAge (1m).
	MaxViewAge time.Duration
	// FlushTimeout bounds each store call of a flush. Must be >= 0; zero
	// means DefaultFlushTimeout (1s).
	FlushTimeout time.Duration
	// Flush, when set, is the limiter flush calls go to instead of the one
	// in front of which the Async sits: for a chain whose failure policy
	// and breaker are there for checks (edge.Guard), so that a flush, which
	// is sent again when it fails, is bounded by FlushTimeout rather than
	// by the checks' timeout, and its failures do not open the checks'
	// breaker. It must decide on the same store. Default nil: flushes go
	// where checks go.
	Flush sluice.Limiter
	// FirstSight is accepted for compatibility and has no effect: a key's
	// first checks go to the store (docs/design.md, "The async edge").
	// Must be >= 0.
	//
	// Deprecated: admitting a key's first checks locally cost more than
	// the store call it saved.
	FirstSight int64
	// Logger receives failed flush rounds, at most one line per 10 s.
	// Default: nothing is logged.
	Logger *slog.Logger
	// Now reads the clock. It must be safe for concurrent use. Default
	// time.Now.
	Now func() time.Time
}

// AsyncStats is a snapshot of an Async limiter's counters and gauges.
type AsyncStats struct {
	// Local counts decisions made from the local view; Sync those passed
	// to the store (no view, a full table, a short window, or a spent
	// budget while the store may still allow).
	Local, Sync uint64
	// FirstSight is 0.
	//
	// Deprecated: see AsyncOptions.FirstSight.
	FirstSight uint64
	// Overflow counts answers not kept because the table was full.
	Overflow uint64
	// Keys is the number of keys tracked now; Pending their cost admitted
	// here and not yet recorded by the store (gauges).
	Keys, Pending int64
	// Flushes counts flush rounds; FlushCalls their store calls;
	// FlushErrors the calls that failed (their cost is sent again).
	Flushes, FlushCalls, FlushErrors uint64
	// FlushSeconds is the total time spent in flush rounds; LastFlush the
	// length of the last one.
	FlushSeconds float64
	LastFlush    time.Duration
	// ViewAge is the age of the oldest view of a key used in the last
	// second, as of the last sweep (a gauge).
	ViewAge time.Duration
	// Dropped counts cost admitted here never sent: owed for longer than
	// its window, or still owed when Close gave up.
	Dropped uint64
	// Unrecorded counts cost admitted here that the store refused, the
	// key being full: over-admission that was seen.
	Unrecorded uint64
}

// An Async is a sluice.Limiter that decides checks locally, from a view of
// the shared usage (what the store said remained at its last reply) less
// the cost admitted here and not yet sent, and sends each key's pending
// cost to the store in the background every SyncInterval. A key without a
// usable view is decided by the store; from its third sight in a short
// while (viewSight) its answer becomes its view, so that a key checked once
// or twice costs no slot and each of its checks costs what a synchronous
// limiter's does. A key whose budget here is spent while no denial by the
// store stands is asked of the store, one caller per key at a time. It is
// safe for concurrent use, and runs one coordinating goroutine and
// Flushers flushers, whatever the traffic; Close stops them after sending
// everything pending. Make one with NewAsync: the zero value's Check
// returns an error wrapping sluice.ErrInvalid.
type Async struct {
	next       sluice.Limiter
	flushTo    sluice.Limiter // AsyncOptions.Flush, or next
	interval   time.Duration
	processes  int64
	maxKeys    int64
	maxBytes   int64
	maxViewAge time.Duration
	timeout    time.Duration
	now        func() time.Time
	clock      func() time.Duration // since base
	base       time.Time
	log        *slog.Logger
	logs       throttle

	secret secret // keys the fingerprints of slots
	seen   seenFilter
	shards [asyncShards]asyncShard
	nextID atomic.Uint64
	keys   atomic.Int64
	bytes  atomic.Int64

	// Slots with cost to send, each at most once; urgent, those near their
	// budget, which a kick sends at once.
	qmu      sync.Mutex
	queue    []*slot
	urgent   []*slot
	kick     chan struct{}
	flushNow chan chan struct{} // a round now, closing the channel after
	oneCall  chan struct{}      // one flush call at a time (see Flushers)
	work     chan flushItem
	round    sync.WaitGroup
	closing  chan struct{}
	done     chan struct{}
	closed   atomic.Bool
	active   atomic.Int64  // checks under way, for Close
	idle     chan struct{} // closed when no check is under way after Close
	idleOnce sync.Once
	once     sync.Once
	// callCtx is the parent of every flush call, canceled when Close's
	// context ends.
	callCtx     context.Context
	cancelCalls context.CancelFunc
	closeErr    error
	closeCtx    context.Context
	sweepHook   func(s *slot) // tests: runs after sweep removed s

	asking                         atomic.Int64 // store calls of checks under way
	local, sync, overflow          atomic.Uint64
	pending                        atomic.Int64
	flushes, flushCalls, flushErrs atomic.Uint64
	flushNanos, lastFlush, viewAge atomic.Int64
	dropped, unrecorded            atomic.Uint64
}

var _ sluice.Limiter = (*Async)(nil)

const asyncShards = 64

type asyncShard struct {
	mu sync.RWMutex
	m  map[fingerprint]*slot // by fingerprint of the slotKey
}

// slotKey is what a slot sends its cost with: a hit (the last limit seen
// for the key, without its Name), the check's group and shadow flag.
type slotKey struct {
	hit    sluice.Hit
	group  string
	shadow bool
}

// A slot is one key tracked: one state in the store, guarded by mu.
type slot struct {
	fp fingerprint
	id uint64 // lock order

	mu  sync.Mutex
	key slotKey
	// view is the store's last answer, at viewAt (ns since base; 0: none).
	view   sluice.HitResult
	viewAt int64
	// A denial by the store of deniedCost stands (for that cost or more)
	// until deniedUntil: other traffic can only add usage. deniedAhead: it
	// answered that cost together with unsent cost (askWithUnsent), for an
	// algorithm under which usage recorded later can expire sooner than
	// that answer assumed; it then ends when the key's next answer comes.
	deniedCost, deniedUntil int64
	deniedAhead             bool
	// pending is admitted here and not sent, by age in owed; inflight is
	// being sent.
	pending, inflight int64
	owed              owed
	queued, urgent    bool // on the queue; on the urgent queue
	flushing          bool // a flush of the key is under way
	asking            bool // a check of the key is being asked of the store
	dead              bool // removed from the table: checks go to the store
	lastUse           int64
	// wake is closed when a flush or an ask of the key ends; nil while no
	// one waits.
	wake chan struct{}
}

// waitChan returns a channel closed at the end of s's flush or ask.
func (s *slot) waitChan() <-chan struct{} {
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.wake
}

// broadcast wakes those waiting on s, locked.
func (s *slot) broadcast() {
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

// NewAsync returns an Async limiter in front of next and starts its
// flushers. Call Close to stop them.
func NewAsync(next sluice.Limiter, opts AsyncOptions) (*Async, error) {
	if err := opts.validate(next); err != nil {
		return nil, err
	}
	a := &Async{
		next: next, interval: orDefault(opts.SyncInterval, DefaultSyncInterval), processes: max(int64(opts.Processes), 1),
		maxKeys: orDefault(int64(opts.MaxKeys), DefaultAsyncMaxKeys), maxBytes: orDefault(opts.MaxBytes, DefaultAsyncMaxBytes),
		maxViewAge: orDefault(opts.MaxViewAge, DefaultMaxViewAge), timeout: orDefault(opts.FlushTimeout, DefaultFlushTimeout),
		now: opts.Now, log: opts.Logger, secret: newSecret(),
		kick: make(chan struct{}, 1), oneCall: make(chan struct{}, 1), flushNow: make(chan chan struct{}), closing: make(chan struct{}), done: make(chan struct{}),
		idle: make(chan struct{}),
	}
	if a.flushTo = opts.Flush; a.flushTo == nil {
		a.flushTo = next
	}
	a.callCtx, a.cancelCalls = context.WithCancel(context.Background())
	a.clock = func() time.Duration { return time.Since(a.base) } // the monotonic clock alone
	if opts.Now != nil {
		a.clock = func() time.Duration { return opts.Now().Sub(a.base) }
	} else {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.logs = throttle{every: DefaultLogInterval, now: a.now}
	a.base = a.now().Add(-time.Second) // so that mono() > 0
	for i := range a.shards {
		a.shards[i].m = make(map[fingerprint]*slot)
	}
	a.seen.init(a.maxKeys, a.maxBytes)
	a.maxBytes -= a.seen.bytes()
	flushers := orDefault(opts.Flushers, DefaultFlushers)
	a.work = make(chan flushItem, flushers)
	for range flushers {
		go a.flusher()
	}
	go a.run()
	return a, nil
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

func (o AsyncOptions) validate(next sluice.Limiter) error {
	if next == nil {
		return fmt.Errorf("edge: %w: NewAsync needs a limiter", sluice.ErrInvalid)
	}
	for _, f := range []struct {
		name string
		v    any
		bad  bool
	}{{"SyncInterval", o.SyncInterval, o.SyncInterval < 0}, {"Processes", o.Processes, o.Processes < 0}, {"Flushers", o.Flushers, o.Flushers < 0},
		{"MaxKeys", o.MaxKeys, o.MaxKeys < 0}, {"MaxBytes", o.MaxBytes, o.MaxBytes < 0}, {"MaxViewAge", o.MaxViewAge, o.MaxViewAge < 0},
		{"FirstSight", o.FirstSight, o.FirstSight < 0}, {"FlushTimeout", o.FlushTimeout, o.FlushTimeout < 0}} {
		if f.bad {
			return fmt.Errorf("edge: %w: AsyncOptions.%s must be >= 0, got %v", sluice.ErrInvalid, f.name, f.v)
		}
	}
	return nil
}

// SyncInterval returns how often pending cost is sent.
func (a *Async) SyncInterval() time.Duration { return a.interval }

// Stats returns a snapshot of the limiter's counters.
func (a *Async) Stats() AsyncStats {
	return AsyncStats{
		Local: a.local.Load(), Sync: a.sync.Load(), Overflow: a.overflow.Load(),
		Keys: a.keys.Load(), Pending: a.pending.Load(),
		Flushes: a.flushes.Load(), FlushCalls: a.flushCalls.Load(), FlushErrors: a.flushErrs.Load(),
		FlushSeconds: time.Duration(a.flushNanos.Load()).Seconds(), LastFlush: time.Duration(a.lastFlush.Load()),
		ViewAge: time.Duration(a.viewAge.Load()),
		Dropped: a.dropped.Load(), Unrecorded: a.unrecorded.Load(),
	}
}

// fingerprint returns the digest of the state identity of k (ident.State:
// zone, key, group, algorithm, window, bucket), the slots' map key: not
// the limit's Name, Rate or shadow flags, so checks of one state share one
// slot and budget, also across a reload that changes the rate.
func (a *Async) fingerprint(k *slotKey) fingerprint {
	l := &k.hit.Limit
	st := ident.State{Zone: k.hit.Zone, Key: k.hit.Key, Group: k.group, Limit: ident.LimitOf(string(l.Algo()), l.Window, l.Bucket())}
	var h hasher
	h.init(&a.secret)
	h.str(st.Zone)
	h.str(st.Key)
	h.str(st.Group)
	h.word(uint64(st.Limit.Code), uint64(st.Limit.Window))
	h.word(uint64(st.Limit.Bucket), 0)
	return h.sum()
}

// slotKeyOf returns what a slot of c's hit i sends its cost with.
func slotKeyOf(c *sluice.Check, i int) slotKey {
	h := c.Hits[i]
	h.Limit.Name = "" // changes nothing the store decides; not kept
	h.Limit.Algorithm = h.Limit.Algo()
	return slotKey{hit: h, group: c.Group, shadow: c.Shadow}
}

func (a *Async) shard(fp fingerprint) *asyncShard {
	return &a.shards[fp.hi%asyncShards]
}

// slot returns the slot of fp, or nil.
func (a *Async) slot(fp fingerprint) *slot {
	sh := a.shard(fp)
	sh.mu.RLock()
	s := sh.m[fp]
	sh.mu.RUnlock()
	return s
}

// addSlot returns the slot of k (fingerprint fp), adding one if the
// bounds allow, or nil.
func (a *Async) addSlot(k *slotKey, fp fingerprint) *slot {
	sh := a.shard(fp)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s := sh.m[fp]; s != nil {
		return s
	}
	size := keyBytes(k)
	if a.keys.Load() >= a.maxKeys || a.bytes.Load()+size > a.maxBytes {
		return nil
	}
	s := &slot{key: *k, fp: fp, id: a.nextID.Add(1)}
	sh.m[fp] = s
	a.keys.Add(1)
	a.bytes.Add(size)
	return s
}

// remove deletes s, locked, from sh, locked, and marks it dead so that a
// check holding it goes to the store; its pending cost is forgotten.
func (a *Async) remove(sh *asyncShard, s *slot) {
	s.dead = true
	a.pending.Add(-s.pending)
	s.pending, s.owed = 0, owed{}
	delete(sh.m, s.fp)
	a.keys.Add(-1)
	a.bytes.Add(-keyBytes(&s.key))
}

// keyBytes is what a slot of k is counted for in MaxBytes.
func keyBytes(k *slotKey) int64 {
	return slotOverhead + int64(len(k.hit.Zone)+len(k.hit.Key)+len(k.group))
}

// viewSight is the sight of a key from which the store's answers become
// its view (its slot): the keys seen fewer times within two generations of
// marks are decided by the store alone, as by a synchronous limiter, at its
// cost. A slot is a map entry, strings and a lock the collector traverses
// while it lives, and each local admission a flush of its own: spread
// traffic (many keys, each seen every few seconds, where a view is rarely
// used) would fill the table with slots and the store with flushes that
// save nothing. A key seen twice is no sign of a third sight; a key seen
// three times in a short while is.
const viewSight = 3

// Layout of a mark: the generation (1 to markGens, 0: free), the sights
// before this one, and the tag (fingerprint bits above the index).
const (
	markTagBits  = 23
	markTag      = 1<<markTagBits - 1
	markCountBit = markTagBits // 2 bits
	markGenBit   = markTagBits + 2
	markGens     = 127
	// markSample: one mark in markSample counts towards the next
	// generation, so that the shared counter is written rarely.
	markSample = 16
)

// seenFilter marks the keys answered by the store and not (yet) given a
// slot: one 32-bit word per index, the last key marked there (its tag,
// its sights, the generation of the last). The generation advances every
// half MaxKeys marks (sampled), so that a key's sights count within the
// last half to one MaxKeys keys answered. Pointer-free: nothing for the
// collector to traverse. Two keys may share an index: one's mark then
// overwrites the other's (its slot waits for more sights), or, for the
// same tag, a key gets its slot sooner; neither changes a decision, and
// neither does a mark lost to a concurrent write.
type seenFilter struct {
	marks []atomic.Uint32
	gen   atomic.Uint32
	n     atomic.Int64 // sampled marks of this generation
	every int64        // sampled marks per generation
}

// init sizes f for at least 2 × keys marks, within a quarter of maxBytes.
func (f *seenFilter) init(keys, maxBytes int64) {
	n := int64(1024)
	for n < 2*keys && 16*n <= maxBytes {
		n <<= 1
	}
	f.marks = make([]atomic.Uint32, n)
	f.gen.Store(1)
	f.every = max(1, keys/2/markSample)
}

func (f *seenFilter) bytes() int64 { return int64(len(f.marks)) * 4 }

// sighted reports whether this is at least fp's viewSight-th sight within
// the current generation of marks and the one before; else it marks one
// more sight of fp.
func (f *seenFilter) sighted(fp fingerprint) bool {
	m := &f.marks[fp.lo&uint64(len(f.marks)-1)]
	tag := uint32(fp.hi) & markTag
	gen := f.gen.Load()
	e := m.Load()
	sights := uint32(1)
	if e&markTag == tag {
		if g := e >> markGenBit; g == gen || g == prevGen(gen) {
			sights = (e>>markCountBit)&3 + 2
		}
	}
	if sights >= viewSight {
		return true
	}
	m.Store(gen<<markGenBit | (sights-1)<<markCountBit | tag)
	if fp.hi>>32%markSample == 0 && f.n.Add(1) >= f.every {
		f.n.Store(0)
		f.gen.CompareAndSwap(gen, gen%markGens+1)
	}
	return false
}

// prevGen is the generation before g.
func prevGen(g uint32) uint32 {
	if g == 1 {
		return markGens
	}
	return g - 1
}
