package top

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"hash/maphash"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Defaults of Options.
const (
	DefaultCapacity  = 64
	DefaultBuckets   = 4
	DefaultPeriod    = time.Minute
	DefaultNear      = 0.8
	DefaultHistory   = 5 * time.Minute
	DefaultSample    = 32
	DefaultTick      = 100 * time.Millisecond
	DefaultBudget    = 4096
	maxShift         = 10
	maxCapacity      = 1024
	maxBuckets       = 60
	maxHistorySecond = 3600
	minDigestKey     = 16
)

// Options configure a Tracker. The zero value means defaults.
type Options struct {
	// Capacity is the number of counters of each list in each bucket: the
	// error bound of a count is the window's total weight / Capacity. At
	// most 1024. Default 64.
	Capacity int
	// Buckets is the number of buckets Period is cut into; the window
	// slides by Period/Buckets. At most 60. Default 4.
	Buckets int
	// Period is the length of the sliding window of the lists. Default 1m.
	Period time.Duration
	// Near is the usage fraction of a limit, after an allowed check, from
	// which the key is listed as near its limit. Default 0.8.
	Near float64
	// History is how far back the per-second counts go, rounded to whole
	// seconds, at most an hour. Default 5m.
	History time.Duration
	// ShowKeys shows keys as they are; otherwise a key is shown by its
	// keyed digest (Tracker.ID). Default false.
	ShowKeys bool
	// DigestKey is the secret of the keys' digests (Tracker.ID), at
	// least 16 bytes: trackers with the same DigestKey show a key under
	// the same ID, and without it nobody can tell which key an ID
	// stands for, even one of a small set such as IPv4 addresses.
	// Default: 32 random bytes drawn by New, or by NewSet for all its
	// trackers.
	DigestKey []byte
	// Sample is, for a Limiter, how many allowed checks that are not near a
	// limit stand for one observed: one in Sample, drawn at random, is
	// observed with its cost and count multiplied by Sample. Denials and
	// near-limit checks are all observed (below Budget). 1 observes every
	// check. At most 1024. Default 32.
	Sample int
	// Now is the clock. Default time.Now. A Set running its clock (Set.Run)
	// reads it every Tick instead of on every observation.
	Now func() time.Time
	// Tick is how often a running Set reads Now. Default 100ms.
	Tick time.Duration
	// Budget bounds what observing costs under a flood: the observations
	// a tracker's shard makes per second before it samples. Beyond it, a
	// shard observes one check in 2, 4, ... up to 1024 (the fewest that
	// keep it within Budget, from the rate of the second before, doubled
	// within a second each time Budget more are made), drawn at random
	// and counted as many times (checks and weights alike). Below it,
	// every denial and near-limit check is observed. 1 to 2^30. Default
	// 4096.
	Budget int
}

func (o *Options) defaults() error {
	if o.Capacity == 0 {
		o.Capacity = DefaultCapacity
	}
	if o.Buckets == 0 {
		o.Buckets = DefaultBuckets
	}
	if o.Period == 0 {
		o.Period = DefaultPeriod
	}
	if o.Near == 0 {
		o.Near = DefaultNear
	}
	if o.History == 0 {
		o.History = DefaultHistory
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sample == 0 {
		o.Sample = DefaultSample
	}
	if o.Tick == 0 {
		o.Tick = DefaultTick
	}
	if o.Budget == 0 {
		o.Budget = DefaultBudget
	}
	if o.DigestKey == nil {
		o.DigestKey = make([]byte, 32)
		rand.Read(o.DigestKey) // never fails (crypto/rand)
	}
	switch {
	case o.Capacity < 1 || o.Capacity > maxCapacity:
		return errors.New("top: capacity must be between 1 and 1024")
	case o.Buckets < 1 || o.Buckets > maxBuckets:
		return errors.New("top: buckets must be between 1 and 60")
	case o.Period < time.Duration(o.Buckets)*time.Second:
		return errors.New("top: period must be at least one second per bucket")
	case o.Near <= 0 || o.Near > 1:
		return errors.New("top: near must be in (0, 1]")
	case o.Sample < 1 || o.Sample > 1024:
		return errors.New("top: sample must be between 1 and 1024")
	case o.Tick < 0:
		return errors.New("top: tick must be positive")
	case o.Budget < 1 || o.Budget > 1<<30:
		return errors.New("top: budget must be between 1 and 2^30")
	case o.History < time.Second || o.History > maxHistorySecond*time.Second:
		return errors.New("top: history must be between 1s and 1h")
	case len(o.DigestKey) < minDigestKey:
		return errors.New("top: digest key must be at least 16 bytes")
	}
	return nil
}

// Result is what a check meant for one key of a tracked zone.
type Result uint8

// The results.
const (
	// Allowed: the cost was spent.
	Allowed Result = iota
	// Denied: a limit of this zone denied the key.
	Denied
	// ShadowDenied: only a shadow limit of this zone would have denied
	// the key; the cost was spent.
	ShadowDenied
	// Refused: the check was denied by another zone or key; nothing was
	// spent and this key is not to blame.
	Refused
)

// list indexes the three lists of a bucket.
const (
	listDenied = iota
	listAdmitted
	listNear
	nLists
)

// Tracker keeps the lists and per-second counts of one zone. It is safe
// for concurrent use.
type Tracker struct {
	opts   Options
	seed   maphash.Seed
	bucket int64 // bucket length, ns
	// clock, when set and not zero, is the time in Unix nanoseconds kept
	// by a running Set; otherwise Options.Now is called.
	clock *atomic.Int64
	// floor, when set, is the flood floor of the Set the tracker belongs
	// to (Set.floor): a shard that lowers its shift lowers it.
	floor *atomic.Uint32

	// missed counts the checks not observed because their shard was busy
	// (Snapshot.Missed).
	missed atomic.Int64

	// shards split the lists and counts by the runtime's processor (P)
	// that observes: see shard.
	shards []shard
}

// MaxShards bounds the shards of a tracker: GOMAXPROCS when New runs, at
// most MaxShards.
const MaxShards = 4

// shard is a part of a tracker's lists and counts. An observation goes to
// the shard of the processor (P, as the runtime numbers them, modulo the
// shards) that makes it, so that threads observing at once take different
// locks and write different memory, rather than pass the same cache lines
// back and forth; a snapshot merges the shards as it merges buckets. The
// lock is only contended when a goroutine moves to another P between its
// choice of shard and its lock, or by a snapshot.
type shard struct {
	mu sync.Mutex
	// buckets[b][list]; cur is the bucket being filled, epoch its number
	// (time / bucket length).
	buckets [][nLists]*summary
	cur     int
	epoch   int64
	// next is when the bucket after the current one begins (Unix ns), so
	// that an observation in the current bucket divides nothing.
	next    int64
	seconds []second
	// sec is the index in seconds of the second of the latest
	// observation, which began at secStart (Unix ns).
	sec      int
	secStart int64
	// flood is the shard's sampling under a flood (Options.Budget): one
	// check in 2^shift is observed, counted 2^shift times; shift is its
	// low 8 bits, the rest the second (Unix) it was set in. It lapses
	// after a whole second more without an observation, so that a shard
	// whose flood ended does not keep sampling a trickle. Written under
	// mu, read without it before the key is hashed.
	flood atomic.Uint64
	// budgetSec is the second (Unix) that observed and candidates count:
	// the observations made in it since the shift last changed, and the
	// checks they stand for (each 2^shift) that would have been observed
	// without a flood.
	budgetSec            int64
	observed, candidates int64
	// active is budgetSec, for Set.Run to read without the lock: a shard
	// that observed nothing in the current or the previous second is
	// idle and does not hold the set's floor down (Tracker.minShift).
	active        atomic.Int64
	observedTotal int64 // every observation made, for tests
	// The fields above, written by every observation, share no cache
	// line with the next shard's.
	_ [64]byte
}

// second counts the checks of one second.
type second struct {
	unix                    int64
	allowed, denied, shadow int64
}

// New returns a Tracker.
func New(opts Options) (*Tracker, error) {
	return newTracker(opts, min(runtime.GOMAXPROCS(0), MaxShards))
}

// newTracker returns a Tracker of n shards.
func newTracker(opts Options, n int) (*Tracker, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	t := &Tracker{opts: opts, seed: maphash.MakeSeed(), bucket: int64(opts.Period) / int64(opts.Buckets)}
	epoch := opts.Now().UnixNano() / t.bucket
	t.shards = make([]shard, n)
	for i := range t.shards {
		sh := &t.shards[i]
		sh.buckets = make([][nLists]*summary, opts.Buckets)
		for b := range sh.buckets {
			for l := range nLists {
				sh.buckets[b][l] = newSummary(opts.Capacity)
			}
		}
		sh.seconds = make([]second, int(opts.History/time.Second))
		sh.epoch = epoch
		sh.next = (epoch + 1) * t.bucket
		sh.secStart = math.MinInt64 / 2  // no second yet
		sh.budgetSec = math.MinInt64 / 2 // no second yet
		sh.active.Store(sh.budgetSec)
	}
	return t, nil
}

// Bytes is the memory the tracker holds, whatever the traffic.
func (t *Tracker) Bytes() int {
	sh := &t.shards[0]
	s := sh.buckets[0][0]
	per := len(s.entries)*int(unsafe.Sizeof(entry{})) + 8*len(s.counts) + len(s.index)*int(unsafe.Sizeof(slot{})) + 2*cap(s.mins) + int(unsafe.Sizeof(summary{}))
	perShard := len(sh.buckets)*nLists*per + len(sh.seconds)*int(unsafe.Sizeof(second{})) + int(unsafe.Sizeof(shard{}))
	return len(t.shards)*perShard + int(unsafe.Sizeof(Tracker{}))
}

// ShowKeys reports whether keys are shown as they are.
func (t *Tracker) ShowKeys() bool { return t.opts.ShowKeys }

// Observe records one check of key: its result, the cost it spent (for
// Allowed and ShadowDenied) and the highest usage fraction of the key's
// limits after it (Used / Rate). It does not allocate, and never waits:
// while another observation or a snapshot holds its shard, the check
// is counted in Snapshot.Missed instead.
func (t *Tracker) Observe(key string, r Result, cost int64, usage float64) {
	t.observe(key, r, cost, usage, 1, 0)
}

// now is the current time in Unix nanoseconds.
func (t *Tracker) now() int64 {
	if t.clock != nil {
		if now := t.clock.Load(); now != 0 {
			return now
		}
	}
	return t.opts.Now().UnixNano()
}

// observe records a check that stands for scale checks (a sample): an
// allowed check counts scale times its cost and scale allowed checks.
// The check was drawn already with probability 2^-pre (Set.floor).
func (t *Tracker) observe(key string, r Result, cost int64, usage float64, scale int64, pre uint32) {
	if sh, k, ok := t.draw(pre); ok {
		t.observeShard(sh, k, key, r, cost, usage, scale<<k)
	}
}

// draw picks the shard of the calling goroutine's P and whether, under
// its shift (Options.Budget), the check is observed, given that it was
// drawn already with probability 2^-pre: k is then the larger of the
// two, the check stands for 2^k, and only the k-pre bits left are drawn.
func (t *Tracker) draw(pre uint32) (sh *shard, k uint32, ok bool) {
	p := procPin()
	procUnpin()
	sh = &t.shards[uint(p)%uint(len(t.shards))]
	// As drawIn, written out: a check under a flood pays no call here.
	f := sh.flood.Load()
	if f == 0 {
		return sh, pre, true
	}
	if c := t.clock; c == nil || c.Load() == 0 {
		k = shiftAt(f, t.now())
	} else {
		k = uint32(f & 0xff)
	}
	if k <= pre {
		return sh, pre, true
	}
	return sh, k, cheaprand()&(1<<(k-pre)-1) == 0
}

// drawIn is draw in shard sh.
func (t *Tracker) drawIn(sh *shard) (k uint32, ok bool) {
	k = t.shift(sh)
	// A flood: one check in 2^k is observed, drawn before anything else
	// is paid.
	return k, k == 0 || cheaprand()&(1<<k-1) == 0
}

// shift returns sh's shift now: 0 without a flood, or once it lapsed.
// A running Set lapses floods on its clock's tick (Set.Run); otherwise
// the clock is read here.
func (t *Tracker) shift(sh *shard) uint32 {
	f := sh.flood.Load()
	if f == 0 {
		return 0
	}
	if c := t.clock; c == nil || c.Load() == 0 {
		return shiftAt(f, t.now())
	}
	return uint32(f & 0xff)
}

// shiftAt is the shift of flood f at now (Unix ns): 0 once it lapsed,
// after a whole second more than the one it was set in.
func shiftAt(f uint64, now int64) uint32 {
	if now/1e9 > int64(f>>8)+1 {
		return 0 // the next observation sets it again
	}
	return uint32(f & 0xff)
}

// lowerFloor makes floor at most k.
func lowerFloor(floor *atomic.Uint32, k uint32) {
	for {
		f := floor.Load()
		if f <= k || floor.CompareAndSwap(f, k) {
			return
		}
	}
}

// minShift is the smallest shift at now of t's shards that are not idle
// (that observed something in the current or the previous second), and
// whether there was any. An idle shard is left out: a flood observed on
// fewer processors than there are shards must still raise the floor.
// When an idle shard observes again, its first observation of the
// second lowers the floor to its shift at once (shard.budget).
func (t *Tracker) minShift(now int64) (m uint32, ok bool) {
	m = maxShift
	for i := range t.shards {
		sh := &t.shards[i]
		if sh.active.Load() < now/1e9-1 {
			continue
		}
		m, ok = min(m, shiftAt(sh.flood.Load(), now)), true
	}
	return m, ok
}

// lapse ends the floods of the shards that lapsed at now.
func (t *Tracker) lapse(now int64) {
	for i := range t.shards {
		f := &t.shards[i].flood
		if v := f.Load(); v != 0 && shiftAt(v, now) == 0 {
			f.CompareAndSwap(v, 0) // unless an observation set it again
		}
	}
}

// observeIn is observe into shard p (modulo the shards).
func (t *Tracker) observeIn(p uint, key string, r Result, cost int64, usage float64, scale int64) {
	sh := &t.shards[p%uint(len(t.shards))]
	if k, ok := t.drawIn(sh); ok {
		t.observeShard(sh, k, key, r, cost, usage, scale<<k)
	}
}

// observeShard records into sh a check drawn at shift k that stands for
// scale checks.
func (t *Tracker) observeShard(sh *shard, k uint32, key string, r Result, cost int64, usage float64, scale int64) {
	now := t.now()
	o := obs{hash: maphash.String(t.seed, key), key: key, now: now}
	if !sh.mu.TryLock() {
		// Another check or a snapshot holds the shard: rather than make
		// a decision wait on diagnostics, count the observation as missed.
		t.missed.Add(scale)
		return
	}
	sh.record(t, &o, r, cost, usage, scale)
	sh.budget(t, now, k)
	sh.mu.Unlock()
}

// budget counts one observation made at shift k and sets the shift for
// the next: at a new second, the fewest doublings that would have kept
// the second before within Options.Budget (none after a second without
// observations); within a second, one more doubling each time Budget
// observations are made.
func (sh *shard) budget(t *Tracker, now int64, k uint32) {
	sh.observedTotal++
	budget := int64(t.opts.Budget)
	if u := now / 1e9; u != sh.budgetSec {
		next := uint32(0)
		if u == sh.budgetSec+1 {
			for next < maxShift && sh.candidates>>next > budget {
				next++
			}
		}
		sh.budgetSec, sh.observed, sh.candidates = u, 0, 0
		sh.active.Store(u)
		sh.setShift(t, u, next)
		if next != k {
			return // this observation was drawn at the old shift
		}
	}
	sh.observed++
	sh.candidates += 1 << k
	if sh.observed > budget && k < maxShift {
		sh.setShift(t, sh.budgetSec, k+1)
		sh.observed = 0
	}
}

// setShift makes k the shift, set in second u, and lowers t's floor to
// k if it was higher.
func (sh *shard) setShift(t *Tracker, u int64, k uint32) {
	if t.floor != nil {
		lowerFloor(t.floor, k)
	}
	if k == 0 {
		sh.flood.Store(0)
		return
	}
	sh.flood.Store(uint64(u)<<8 | uint64(k))
}

// record is observe under the shard's lock.
func (sh *shard) record(t *Tracker, o *obs, r Result, cost int64, usage float64, scale int64) {
	now := o.now
	sh.advance(now, t.bucket)
	sec := sh.second(now)
	b := &sh.buckets[sh.cur]
	switch r {
	case Allowed:
		sec.allowed += scale
	case Denied:
		sec.denied += scale
	case ShadowDenied:
		sec.shadow += scale
	case Refused:
		sec.denied += scale
		return
	}
	if r == Denied || r == ShadowDenied {
		o.weight, o.shadow, o.inherit = scale, r == ShadowDenied, sh.previous(listDenied)
		b[listDenied].add(o)
		o.shadow, o.inherit = false, nil
	}
	if r == Denied {
		return
	}
	if cost > 0 {
		o.weight = cost * scale
		b[listAdmitted].add(o)
	}
	if usage >= t.opts.Near {
		o.weight, o.peak, o.inherit = scale, int64(usage*1e6), sh.previous(listNear)
		b[listNear].add(o)
	}
}

// previous is list l of the bucket before the current one, whose streaks
// a key entering the current bucket continues; nil with one bucket.
func (sh *shard) previous(l int) *summary {
	if len(sh.buckets) == 1 {
		return nil
	}
	p := sh.cur - 1
	if p < 0 {
		p = len(sh.buckets) - 1
	}
	return sh.buckets[p][l]
}

// second returns the counts of now's second, cleared if they were an
// older second's.
func (sh *shard) second(now int64) *second {
	if now >= sh.secStart && now-sh.secStart < 1e9 {
		return &sh.seconds[sh.sec]
	}
	u := now / 1e9
	sh.sec, sh.secStart = int(u%int64(len(sh.seconds))), u*1e9
	sec := &sh.seconds[sh.sec]
	if sec.unix != u {
		*sec = second{unix: u}
	}
	return sec
}

// advance moves the current bucket to the one of now (buckets of length
// bucket ns), clearing the buckets it passes over.
func (sh *shard) advance(now, bucket int64) {
	if now < sh.next {
		return
	}
	e := now / bucket
	sh.next = (e + 1) * bucket
	for n := min(e-sh.epoch, int64(len(sh.buckets))); n > 0; n-- {
		sh.cur = (sh.cur + 1) % len(sh.buckets)
		for _, s := range sh.buckets[sh.cur] {
			s.reset()
		}
	}
	sh.epoch = e
}

// observations returns the observations made since the tracker was
// made (for tests).
func (t *Tracker) observations() int64 {
	t.lock()
	defer t.unlock()
	var n int64
	for i := range t.shards {
		n += t.shards[i].observedTotal
	}
	return n
}

// lock locks every shard, in order.
func (t *Tracker) lock() {
	for i := range t.shards {
		t.shards[i].mu.Lock()
	}
}

func (t *Tracker) unlock() {
	for i := range t.shards {
		t.shards[i].mu.Unlock()
	}
}

// Forget removes key from every list, as after a reset of its state.
func (t *Tracker) Forget(key string) {
	h := maphash.String(t.seed, key)
	t.lock()
	defer t.unlock()
	for i := range t.shards {
		for _, b := range t.shards[i].buckets {
			for _, s := range b {
				s.remove(h)
			}
		}
	}
}

// Lookup returns the key whose ID (see Key.ID) is id, if some list holds
// it whole (keys longer than KeyBytes are not kept).
func (t *Tracker) Lookup(id string) (string, bool) {
	t.lock()
	defer t.unlock()
	d := t.digester()
	for i := range t.shards {
		for _, b := range t.shards[i].buckets {
			for _, s := range b {
				for i := range s.entries {
					e := &s.entries[i]
					if s.counts[i] > 0 && !e.long && d.id(e) == id {
						return e.keyString(), true
					}
				}
			}
		}
	}
	return "", false
}

// Key is one key of a list.
type Key struct {
	// ID is the key's keyed digest (Tracker.ID).
	ID string `json:"id"`
	// Key is the key itself with Options.ShowKeys (its first KeyBytes
	// bytes and "..." when longer); otherwise empty.
	Key string `json:"key,omitempty"`
	// Count is the estimated weight in the window: denials, admitted cost,
	// or near-limit checks. Error bounds how much Count may exceed the
	// true weight.
	Count int64 `json:"count"`
	Error int64 `json:"error"`
	// Since is when the key's current streak in this list began (its
	// first denial, for the denied list); Last is its latest observation.
	Since time.Time `json:"since"`
	Last  time.Time `json:"last"`
	// Usage is the highest usage fraction observed (near list only).
	Usage float64 `json:"usage,omitempty"`
	// Shadow is whether the latest denial was a shadow limit's (denied
	// list only).
	Shadow bool `json:"shadow,omitempty"`
	// Resettable is whether the server still holds the key whole, so that
	// it can be reset by ID.
	Resettable bool `json:"resettable"`
}

// Second is the checks of one second.
type Second struct {
	Unix         int64 `json:"t"`
	Allowed      int64 `json:"allowed"`
	Denied       int64 `json:"denied"`
	ShadowDenied int64 `json:"shadow_denied"`
}

// Snapshot is the state of a tracker at one instant.
type Snapshot struct {
	// Window is the span the lists cover now; Total the weights observed
	// in it per list, whose quotient by Capacity bounds every count's
	// error.
	Window   time.Duration `json:"window_ns"`
	Capacity int           `json:"capacity"`
	// Denied, Admitted and Near are the top n keys of each list, largest
	// count first.
	Denied   []Key `json:"denied"`
	Admitted []Key `json:"admitted"`
	Near     []Key `json:"near"`
	// DeniedTotal, AdmittedTotal and NearTotal are the lists' total
	// weights in the window.
	DeniedTotal   int64 `json:"denied_total"`
	AdmittedTotal int64 `json:"admitted_total"`
	NearTotal     int64 `json:"near_total"`
	// Seconds are the per-second counts of the history, oldest first,
	// ending with the current (partial) second.
	Seconds []Second `json:"seconds"`
	// Missed is the number of checks not observed since the tracker was
	// made because their shard was busy with another observation or a
	// snapshot (observation never waits).
	// The lists and the per-second counts leave them out; a count's error
	// may exceed its bound by at most the weight missed.
	Missed int64 `json:"missed"`
	// Sampling is how many checks one observation stands for now under a
	// flood (Options.Budget), the largest over the shards: 1 while every
	// denial and near-limit check is observed; 2 to 1024 while a shard
	// samples, when every count and rate is an estimate.
	Sampling int64 `json:"sampling"`
}

// Snapshot returns the top n keys of each list and the history.
func (t *Tracker) Snapshot(n int) Snapshot {
	now := t.now()
	t.lock()
	defer t.unlock()
	for i := range t.shards {
		t.shards[i].advance(now, t.bucket)
	}
	s := Snapshot{Capacity: t.opts.Capacity, Missed: t.missed.Load(), Sampling: 1}
	for i := range t.shards {
		s.Sampling = max(s.Sampling, int64(1)<<shiftAt(t.shards[i].flood.Load(), now))
	}
	// The buckets still in the window: the current one and the ones
	// before it, back to Period.
	sh0 := &t.shards[0]
	s.Window = time.Duration(now - (sh0.epoch-int64(len(sh0.buckets))+1)*t.bucket)
	var totals [nLists]int64
	for l := range nLists {
		list := t.merge(l, n, &totals[l])
		switch l {
		case listDenied:
			s.Denied = list
		case listAdmitted:
			s.Admitted = list
		case listNear:
			s.Near = list
		}
	}
	s.DeniedTotal, s.AdmittedTotal, s.NearTotal = totals[listDenied], totals[listAdmitted], totals[listNear]
	hist := len(sh0.seconds)
	s.Seconds = make([]Second, 0, hist)
	for sec := now/1e9 - int64(hist) + 1; sec <= now/1e9; sec++ {
		out := Second{Unix: sec}
		for i := range t.shards {
			if x := t.shards[i].seconds[int(sec)%hist]; x.unix == sec {
				out.Allowed += x.allowed
				out.Denied += x.denied
				out.ShadowDenied += x.shadow
			}
		}
		s.Seconds = append(s.Seconds, out)
	}
	return s
}

// merge sums list l over the shards and buckets and returns its top n
// keys.
func (t *Tracker) merge(l, n int, total *int64) []Key {
	type agg struct {
		e          *entry // the entry observed last
		count, err int64
		since      int64
		last, peak int64
	}
	m := map[uint64]*agg{}
	for i := range t.shards {
		sh := &t.shards[i]
		for _, b := range sh.buckets {
			s := b[l]
			*total += s.total
			for i := range s.entries {
				e := &s.entries[i]
				if s.counts[i] == 0 {
					continue
				}
				a := m[e.hash]
				if a == nil {
					a = &agg{e: e, since: e.since, last: e.last}
					m[e.hash] = a
				}
				if e.last > a.last {
					a.e = e
				}
				a.count += s.counts[i]
				a.err += e.err
				a.since, a.last, a.peak = min(a.since, e.since), max(a.last, e.last), max(a.peak, e.peak)
			}
		}
	}
	aggs := make([]*agg, 0, len(m))
	for _, a := range m {
		aggs = append(aggs, a)
	}
	sort.Slice(aggs, func(i, j int) bool {
		if aggs[i].count != aggs[j].count {
			return aggs[i].count > aggs[j].count
		}
		return aggs[i].e.hash < aggs[j].e.hash
	})
	keys := make([]Key, 0, min(n, len(aggs)))
	d := t.digester()
	for _, a := range aggs[:min(n, len(aggs))] {
		k := Key{ID: d.id(a.e), Count: a.count, Error: a.err, Since: time.Unix(0, a.since).UTC(), Last: time.Unix(0, a.last).UTC(), Resettable: !a.e.long}
		if t.opts.ShowKeys {
			k.Key = a.e.keyString()
			if a.e.long {
				k.Key += "..."
			}
		}
		if l == listNear {
			k.Usage = float64(a.peak) / 1e6
		}
		k.Shadow = l == listDenied && a.e.shadow
		keys = append(keys, k)
	}
	return keys
}

// ID returns the ID under which key is listed: "hmac:" and the first 16
// hex digits of the HMAC-SHA-256 of key under Options.DigestKey, as in
//
//	printf %s "$KEY" | openssl dgst -sha256 -hmac "$SECRET" -r | cut -c1-16
//
// (for a key longer than KeyBytes, whose bytes are not kept, of a zero
// byte and the first 8 bytes of its SHA-256).
func (t *Tracker) ID(key string) string {
	var e entry
	e.setKey(key)
	return t.digester().id(&e)
}

// ID is Tracker.ID for the set's trackers, which share their DigestKey.
func (s *Set) ID(key string) string {
	var e entry
	e.setKey(key)
	return digester{hmac.New(sha256.New, s.opts.DigestKey)}.id(&e)
}

// digester computes entries' IDs; not safe for concurrent use.
type digester struct{ mac hash.Hash }

func (t *Tracker) digester() digester {
	return digester{hmac.New(sha256.New, t.opts.DigestKey)}
}

func (d digester) id(e *entry) string {
	d.mac.Reset()
	if e.long {
		d.mac.Write([]byte{0})
		d.mac.Write(e.digest[:])
	} else {
		d.mac.Write(e.key[:e.klen])
	}
	var sum [sha256.Size]byte
	return "hmac:" + hex.EncodeToString(d.mac.Sum(sum[:0])[:8])
}
