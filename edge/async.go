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
	// DefaultSyncInterval is how often pending cost is sent. The
	// over-admission bound grows linearly with it, and a hot key costs the
	// store one call per interval per process, so 100 ms keeps the excess
	// to a tenth of a second of local traffic while cutting the store's
	// calls for a key admitted 10,000 times a second by 1,000 times.
	DefaultSyncInterval = 100 * time.Millisecond
	// DefaultFlushers is the number of flusher goroutines: store calls in
	// flight at once during a flush round. The Redis store coalesces
	// concurrent calls into batched script calls.
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

// slotOverhead is what a tracked key costs besides its strings, in bytes,
// counted against AsyncOptions.MaxBytes: the slot, its map entry, its share
// of the queue.
const slotOverhead = 400

// AsyncOptions configure an Async limiter. The zero value means defaults.
type AsyncOptions struct {
	// SyncInterval is how often each key's pending cost is sent to the
	// store, and its view refreshed from the reply. A key is sent sooner,
	// at once, when its unsent cost reaches half of what its view says
	// remains. It should be shorter than the smallest window checked
	// through the limiter (the server refuses a longer one): cost owed for
	// longer than its window is dropped. Must be >= 0; zero means
	// DefaultSyncInterval (100ms).
	SyncInterval time.Duration
	// Processes is the number of processes sharing the store's keys, or 1.
	// Each process then admits locally, between two replies, at most its
	// share (rounded up) of what remained at the last reply, which divides
	// the worst-case over-admission by about Processes (see the package
	// doc). Must be >= 0; zero means 1.
	Processes int
	// Flushers is the number of goroutines that send pending cost: the
	// store calls in flight at once. Must be >= 0; zero means
	// DefaultFlushers (16).
	Flushers int
	// MaxKeys bounds the keys tracked. A check of a key that finds the
	// table full is passed to the store synchronously (AsyncStats.Overflow).
	// It also sizes the seen table (FirstSight 0): at least MaxKeys
	// entries (114,688 for the default).
	// Must be >= 0; zero means DefaultAsyncMaxKeys (100,000).
	MaxKeys int
	// MaxBytes bounds the bytes of the tracked keys' strings plus a fixed
	// overhead of 400 bytes per key, like MaxKeys, and of the seen table
	// (FirstSight 0: 73 bytes per entry, 8 MiB for the default MaxKeys,
	// allocated by NewAsync, at most a quarter of MaxBytes; what it takes
	// is not left for keys). Must be
	// >= 0; zero means DefaultAsyncMaxBytes (64 MiB).
	MaxBytes int64
	// MaxViewAge is the age past which a key's view is not used: its
	// checks go to the store synchronously (while the store fails, that is
	// to its failure policy) until a reply refreshes it. Must be >= 0;
	// zero means DefaultMaxViewAge (1m).
	MaxViewAge time.Duration
	// FlushTimeout bounds each store call of a flush. Must be >= 0; zero
	// means DefaultFlushTimeout (1s).
	FlushTimeout time.Duration
	// FirstSight is the cost a process admits locally on a key it has no
	// view of: up to FirstSight (and the limit's Rate) per key, process and
	// window of the key's first admission, recorded in the store with the
	// next round (in batches when the store is a BatchRecorder, as the
	// Redis store is). A key seen once then costs a 48-byte entry of a
	// table of 2 × MaxKeys entries (allocated when FirstSight > 0) and a
	// record until the next round, no slot. A record that created the key
	// in the store (the Redis store says so of a sliding window not stored
	// yet) is the store's answer: the key's next checks are decided
	// locally from it, as from a check's reply.
	// What the store refuses, because the key was already full, is
	// over-admission, counted in AsyncStats.Unrecorded: at most FirstSight
	// per key, process and window (see docs/failure.md, "First sight").
	// Must be >= 0; zero, the default, checks a key's first sight with the
	// store synchronously, so the accuracy bound does not depend on how
	// many distinct keys clients send.
	//
	// Second sight (FirstSight 0): the store's answer to a key's first
	// check is kept, not in a slot (a heap object with the key's strings),
	// but in the seen table: a set-associative array of at least MaxKeys
	// entries of 73 bytes, no pointers, allocated once. The key's next check,
	// within MaxViewAge and with the same limit, makes the slot from that
	// answer and is decided locally, exactly as from a slot made by the
	// answer: no store call is added. So a key checked once costs no slot,
	// map entry or garbage; a key checked again costs what it did. The
	// cost: a key whose entry was taken meanwhile by other keys seen once
	// (a full set of 7 gives its entries up in turn) is asked of the
	// store again at its second check, and gets its slot at its third.
	// A MaxBytes too small for the table (under 128 KiB) keeps the old
	// rule: a slot at the first answer.
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
	// to the store (no view yet, a stale one, a full table, or a key whose
	// budget here is spent while the store may still allow it).
	Local, Sync uint64
	// FirstSight counts checks admitted locally on a key's first sight
	// (AsyncOptions.FirstSight).
	FirstSight uint64
	// Overflow counts checks passed to the store because the table was
	// full.
	Overflow uint64
	// Keys is the number of keys tracked now; Pending their cost admitted
	// here and not yet recorded by the store (gauges).
	Keys, Pending int64
	// Flushes counts flush rounds; FlushCalls the store calls they made;
	// FlushErrors the calls that failed (their cost is kept and sent
	// again).
	Flushes, FlushCalls, FlushErrors uint64
	// FlushSeconds is the total time spent in flush rounds; LastFlush the
	// length of the last one.
	FlushSeconds float64
	LastFlush    time.Duration
	// ViewAge is the age of the oldest view of a key used in the last
	// second, as of the last sweep (a gauge).
	ViewAge time.Duration
	// Dropped counts cost admitted here that will never be sent: owed for
	// longer than its limit's window (it would be counted in the wrong
	// window), or still owed when Close gave up.
	Dropped uint64
	// Unrecorded counts cost admitted here that the store refused to
	// record because the key was already full: over-admission that was
	// seen.
	Unrecorded uint64
}

// An Async is a sluice.Limiter that decides checks locally, from a view of
// the shared usage (what the store said remained at its last reply) less
// the cost admitted here and not yet sent, and sends each key's pending
// cost to the store in the background every SyncInterval. Its local
// decisions have Source sluice.FromLocalView. A key without a usable view
// is decided by the store synchronously (or admitted up to FirstSight;
// without FirstSight, its first answer waits in the seen table for the
// key's second check, which makes its slot: see AsyncOptions.FirstSight);
// so is a key whose budget here is spent while no denial by the store
// stands on it, one caller per key at a time. It is safe for concurrent
// use. It runs one coordinating goroutine and Flushers flusher goroutines,
// whatever the traffic; Close stops them after sending everything
// pending. Make one with NewAsync: the zero value has no store, and its
// Check returns an error wrapping sluice.ErrInvalid.
type Async struct {
	next       sluice.Limiter
	interval   time.Duration
	processes  int64
	maxKeys    int64
	maxBytes   int64
	maxViewAge time.Duration
	timeout    time.Duration
	firstSight int64
	now        func() time.Time
	clock      func() time.Duration // since base
	base       time.Time
	log        *slog.Logger
	logs       throttle

	secret secret      // keys the fingerprints of slots
	first  *firstTable // nil without FirstSight
	seen   *seenTable  // nil with FirstSight, or a MaxBytes too small for it
	shards [asyncShards]asyncShard
	nextID atomic.Uint64
	keys   atomic.Int64
	bytes  atomic.Int64

	// The queue: slots with something to send, each at most once; and the
	// urgent ones, near their budget, which a kick sends at once.
	qmu    sync.Mutex
	queue  []*slot
	urgent []*slot
	kick   chan struct{}
	// flushNow asks run for a round now; it closes the channel sent when
	// the round is over.
	flushNow chan chan struct{}

	work     chan flushItem
	round    sync.WaitGroup
	closing  chan struct{}
	done     chan struct{}
	closed   atomic.Bool
	active   atomic.Int64  // checks under way, for Close
	idle     chan struct{} // closed when no check is under way after Close
	idleOnce sync.Once
	once     sync.Once
	// callCtx is the parent of every flush call; Close cancels it when its
	// own context ends, so that no flush outlives Close's deadline.
	callCtx     context.Context
	cancelCalls context.CancelFunc
	spare       [2][]*slot // the queues' other buffers, the coordinator's own
	closeErr    error
	closeCtx    context.Context
	// sweepHook, set by tests only, runs after sweep removed s, with s
	// unlocked and its shard locked: a check arriving just then.
	sweepHook func(s *slot)

	asking                           atomic.Int64 // checkSync calls under way (see yield)
	local, sync, overflow, firstSeen atomic.Uint64
	pending                          atomic.Int64
	flushes, flushCalls, flushErrs   atomic.Uint64
	flushNanos, lastFlush, viewAge   atomic.Int64
	dropped, unrecorded              atomic.Uint64
}

var _ sluice.Limiter = (*Async)(nil)

const asyncShards = 64

type asyncShard struct {
	mu sync.RWMutex
	m  map[fingerprint]*slot // by fingerprint of the slotKey
}

// slotKey is what a slot sends its cost with: a hit (the last limit seen
// for the key, without its Name), the check's group and shadow flag. Its
// identity, what the slots' map is keyed by, is the store's state: see
// Async.fingerprint.
type slotKey struct {
	hit    sluice.Hit
	group  string
	shadow bool
}

// A slot is one key tracked by an Async limiter: one state in the store.
type slot struct {
	fp fingerprint
	id uint64 // lock order

	mu  sync.Mutex
	key slotKey
	// The view: the store's last reply, at viewAt (ns since base; 0: none).
	// blind marks a first-sight view, FirstSight and not a reply.
	remaining              int64
	used                   float64
	retryAfter, resetAfter time.Duration
	viewAt                 int64
	blind                  bool
	// fromRecord marks a view made from a first-sight record that created
	// the key in the store (see recordedView): any reply replaces it.
	fromRecord bool
	// A denial by the store of deniedCost, which stands (for that cost or
	// more) until deniedUntil: other traffic can only add usage.
	deniedCost, deniedUntil int64
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

// waitChan returns a channel closed at the next change of s (the end of a
// flush or of an ask). s is locked.
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

// NewAsync returns an Async limiter in front of next, configured by opts,
// and starts its flushers. Call Close to stop them.
func NewAsync(next sluice.Limiter, opts AsyncOptions) (*Async, error) {
	if err := opts.validate(next); err != nil {
		return nil, err
	}
	a := &Async{
		next: next, interval: opts.SyncInterval, processes: int64(opts.Processes),
		maxKeys: int64(opts.MaxKeys), maxBytes: opts.MaxBytes, maxViewAge: opts.MaxViewAge,
		timeout: opts.FlushTimeout, firstSight: opts.FirstSight, now: opts.Now, log: opts.Logger, secret: newSecret(),
		kick: make(chan struct{}, 1), flushNow: make(chan chan struct{}), closing: make(chan struct{}), done: make(chan struct{}),
		idle: make(chan struct{}),
	}
	a.callCtx, a.cancelCalls = context.WithCancel(context.Background())
	a.interval = orDefault(a.interval, DefaultSyncInterval)
	a.maxViewAge = orDefault(a.maxViewAge, DefaultMaxViewAge)
	a.timeout = orDefault(a.timeout, DefaultFlushTimeout)
	a.processes = max(a.processes, 1)
	a.maxKeys = orDefault(a.maxKeys, DefaultAsyncMaxKeys)
	a.maxBytes = orDefault(a.maxBytes, DefaultAsyncMaxBytes)
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
	if a.firstSight > 0 {
		a.first = newFirstTable(a.maxKeys)
	} else if a.seen = newSeenTable(a.maxKeys, a.maxBytes); a.seen != nil {
		a.maxBytes -= a.seen.bytes // what is left for slots
	}
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
	bad := func(field string, v any) error {
		return fmt.Errorf("edge: %w: AsyncOptions.%s must be >= 0, got %v", sluice.ErrInvalid, field, v)
	}
	switch {
	case next == nil:
		return fmt.Errorf("edge: %w: NewAsync needs a limiter", sluice.ErrInvalid)
	case o.SyncInterval < 0:
		return bad("SyncInterval", o.SyncInterval)
	case o.Processes < 0:
		return bad("Processes", o.Processes)
	case o.Flushers < 0:
		return bad("Flushers", o.Flushers)
	case o.MaxKeys < 0:
		return bad("MaxKeys", o.MaxKeys)
	case o.MaxBytes < 0:
		return bad("MaxBytes", o.MaxBytes)
	case o.MaxViewAge < 0:
		return bad("MaxViewAge", o.MaxViewAge)
	case o.FirstSight < 0:
		return bad("FirstSight", o.FirstSight)
	case o.FlushTimeout < 0:
		return bad("FlushTimeout", o.FlushTimeout)
	}
	return nil
}

// SyncInterval returns the interval at which pending cost is sent.
func (a *Async) SyncInterval() time.Duration { return a.interval }

// Stats returns a snapshot of the limiter's counters.
func (a *Async) Stats() AsyncStats {
	return AsyncStats{
		Local: a.local.Load(), Sync: a.sync.Load(), FirstSight: a.firstSeen.Load(), Overflow: a.overflow.Load(),
		Keys: a.keys.Load(), Pending: a.pending.Load(),
		Flushes: a.flushes.Load(), FlushCalls: a.flushCalls.Load(), FlushErrors: a.flushErrs.Load(),
		FlushSeconds: time.Duration(a.flushNanos.Load()).Seconds(), LastFlush: time.Duration(a.lastFlush.Load()),
		ViewAge: time.Duration(a.viewAge.Load()),
		Dropped: a.dropped.Load(), Unrecorded: a.unrecorded.Load(),
	}
}

// fingerprint returns the 128-bit digest of the state identity of k
// (ident.State: zone, key, group, algorithm, window, bucket), the slots'
// map key: one pass over its strings. Nothing else is in it: not the
// limit's Name, Rate or shadow flags, nor the spelling of the default
// algorithm. So two checks that share a state share one slot and one
// budget, also across a reload that changes the rate (the slot then takes
// the new limit, see Async.decide).
func (a *Async) fingerprint(k *slotKey) fingerprint {
	st := stateOf(k)
	var h hasher
	h.init(&a.secret)
	h.str(st.Zone)
	h.str(st.Key)
	h.str(st.Group)
	h.word(uint64(st.Limit.Code), uint64(st.Limit.Window))
	h.word(uint64(st.Limit.Bucket), 0)
	return h.sum()
}

// stateOf returns the identity of the state k's hit names in the store.
func stateOf(k *slotKey) ident.State {
	l := &k.hit.Limit
	return ident.State{Zone: k.hit.Zone, Key: k.hit.Key, Group: k.group,
		Limit: ident.LimitOf(string(l.Algo()), l.Window, l.Bucket())}
}

// slotKeyOf returns what a slot of c's hit i sends its cost with.
func slotKeyOf(c *sluice.Check, i int) slotKey {
	h := c.Hits[i]
	h.Limit.Name = "" // changes nothing the store decides; not kept
	h.Limit.Algorithm = h.Limit.Algo()
	return slotKey{hit: h, group: c.Group, shadow: c.Shadow}
}

// sameLimit reports whether s, locked, was last checked with the limit
// and shadow flag of k: if not, its view was computed against another
// limit and is not used.
func (s *slot) sameLimit(k *slotKey) bool {
	return s.key.hit.Limit == k.hit.Limit && s.key.shadow == k.shadow
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

// addSlot returns the slot of k, whose fingerprint is fp, adding one if
// the bounds allow, or nil.
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
	if a.seen != nil {
		a.seen.meta(fp).Add(1) // the set's count of slots
	}
	sh.m[fp] = s
	a.keys.Add(1)
	a.bytes.Add(size)
	return s
}

// keyBytes is what a slot of k is counted for: the strings of its
// identity (a limit kept without its Name, its Algorithm a constant) and
// slotOverhead.
func keyBytes(k *slotKey) int64 {
	return slotOverhead + int64(len(k.hit.Zone)+len(k.hit.Key)+len(k.group))
}
