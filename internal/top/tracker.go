package top

import (
	"encoding/hex"
	"errors"
	"hash/maphash"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/internal/keyname"
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
	maxCapacity      = 1024
	maxBuckets       = 60
	maxHistorySecond = 3600
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
	// internal/keyname digest. Default false.
	ShowKeys bool
	// Sample is, for a Limiter, how many allowed checks that are not near a
	// limit stand for one observed: one in Sample, drawn at random, is
	// observed with its cost and count multiplied by Sample. Denials and
	// near-limit checks are all observed. 1 observes every check. At most
	// 1024. Default 32.
	Sample int
	// Now is the clock. Default time.Now. A Set running its clock (Set.Run)
	// reads it every Tick instead of on every observation.
	Now func() time.Time
	// Tick is how often a running Set reads Now. Default 100ms.
	Tick time.Duration
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
	case o.History < time.Second || o.History > maxHistorySecond*time.Second:
		return errors.New("top: history must be between 1s and 1h")
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

	// missed counts the checks not observed because the tracker was busy
	// (Snapshot.Missed).
	missed atomic.Int64

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
}

// second counts the checks of one second.
type second struct {
	unix                    int64
	allowed, denied, shadow int64
}

// New returns a Tracker.
func New(opts Options) (*Tracker, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	t := &Tracker{opts: opts, seed: maphash.MakeSeed(), bucket: int64(opts.Period) / int64(opts.Buckets)}
	t.buckets = make([][nLists]*summary, opts.Buckets)
	for i := range t.buckets {
		for l := range nLists {
			t.buckets[i][l] = newSummary(opts.Capacity)
		}
	}
	t.seconds = make([]second, int(opts.History/time.Second))
	t.epoch = opts.Now().UnixNano() / t.bucket
	t.next = (t.epoch + 1) * t.bucket
	t.secStart = math.MinInt64 / 2 // no second yet
	return t, nil
}

// Bytes is the memory the tracker holds, whatever the traffic.
func (t *Tracker) Bytes() int {
	s := t.buckets[0][0]
	per := len(s.entries)*int(unsafe.Sizeof(entry{})) + len(s.index)*int(unsafe.Sizeof(slot{})) + len(s.heap)*int(unsafe.Sizeof(node{})) + 2*len(s.pos) + int(unsafe.Sizeof(summary{}))
	return len(t.buckets)*nLists*per + len(t.seconds)*int(unsafe.Sizeof(second{})) + int(unsafe.Sizeof(Tracker{}))
}

// ShowKeys reports whether keys are shown as they are.
func (t *Tracker) ShowKeys() bool { return t.opts.ShowKeys }

// Observe records one check of key: its result, the cost it spent (for
// Allowed and ShadowDenied) and the highest usage fraction of the key's
// limits after it (Used / Rate). It does not allocate, and never waits:
// while another observation or a snapshot holds the tracker, the check
// is counted in Snapshot.Missed instead.
func (t *Tracker) Observe(key string, r Result, cost int64, usage float64) {
	t.observe(key, r, cost, usage, 1)
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
func (t *Tracker) observe(key string, r Result, cost int64, usage float64, scale int64) {
	now := t.now()
	o := obs{hash: maphash.String(t.seed, key), key: key, now: now}
	if !t.mu.TryLock() {
		// Another check or a snapshot holds the tracker: rather than make
		// a decision wait on diagnostics, count the observation as missed.
		t.missed.Add(scale)
		return
	}
	t.record(&o, r, cost, usage, scale)
	t.mu.Unlock()
}

// record is observe under the lock.
func (t *Tracker) record(o *obs, r Result, cost int64, usage float64, scale int64) {
	now := o.now
	t.advance(now)
	sec := t.second(now)
	b := &t.buckets[t.cur]
	switch r {
	case Allowed:
		sec.allowed += scale
	case Denied:
		sec.denied++
	case ShadowDenied:
		sec.shadow++
	case Refused:
		sec.denied++
		return
	}
	if r == Denied || r == ShadowDenied {
		o.weight, o.shadow, o.inherit = 1, r == ShadowDenied, t.previous(listDenied)
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
		o.weight, o.peak, o.inherit = 1, int64(usage*1e6), t.previous(listNear)
		b[listNear].add(o)
	}
}

// previous is list l of the bucket before the current one, whose streaks
// a key entering the current bucket continues; nil with one bucket.
func (t *Tracker) previous(l int) *summary {
	if len(t.buckets) == 1 {
		return nil
	}
	p := t.cur - 1
	if p < 0 {
		p = len(t.buckets) - 1
	}
	return t.buckets[p][l]
}

// second returns the counts of now's second, cleared if they were an
// older second's.
func (t *Tracker) second(now int64) *second {
	if now >= t.secStart && now-t.secStart < 1e9 {
		return &t.seconds[t.sec]
	}
	u := now / 1e9
	t.sec, t.secStart = int(u%int64(len(t.seconds))), u*1e9
	sec := &t.seconds[t.sec]
	if sec.unix != u {
		*sec = second{unix: u}
	}
	return sec
}

// advance moves the current bucket to the one of now, clearing the
// buckets it passes over.
func (t *Tracker) advance(now int64) {
	if now < t.next {
		return
	}
	e := now / t.bucket
	t.next = (e + 1) * t.bucket
	for n := min(e-t.epoch, int64(len(t.buckets))); n > 0; n-- {
		t.cur = (t.cur + 1) % len(t.buckets)
		for _, s := range t.buckets[t.cur] {
			s.reset()
		}
	}
	t.epoch = e
}

// Forget removes key from every list, as after a reset of its state.
func (t *Tracker) Forget(key string) {
	h := maphash.String(t.seed, key)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.buckets {
		for _, s := range b {
			s.remove(h)
		}
	}
}

// Lookup returns the key whose ID (see Key.ID) is id, if some list holds
// it whole (keys longer than KeyBytes are not kept).
func (t *Tracker) Lookup(id string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.buckets {
		for _, s := range b {
			for i := range s.entries {
				e := &s.entries[i]
				if e.count > 0 && !e.long && keyname.Of(e.keyString()) == id {
					return e.keyString(), true
				}
			}
		}
	}
	return "", false
}

// Key is one key of a list.
type Key struct {
	// ID is the key's internal/keyname digest.
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
	// made because it was busy with another (observation never waits).
	// The lists and the per-second counts leave them out; a count's error
	// may exceed its bound by at most the weight missed.
	Missed int64 `json:"missed"`
}

// Snapshot returns the top n keys of each list and the history.
func (t *Tracker) Snapshot(n int) Snapshot {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(now)
	s := Snapshot{Capacity: t.opts.Capacity, Missed: t.missed.Load()}
	// The buckets still in the window: the current one and the ones
	// before it, back to Period.
	s.Window = time.Duration(now - (t.epoch-int64(len(t.buckets))+1)*t.bucket)
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
	s.Seconds = make([]Second, 0, len(t.seconds))
	for sec := now/1e9 - int64(len(t.seconds)) + 1; sec <= now/1e9; sec++ {
		x := t.seconds[int(sec)%len(t.seconds)]
		if x.unix != sec {
			x = second{}
		}
		s.Seconds = append(s.Seconds, Second{Unix: sec, Allowed: x.allowed, Denied: x.denied, ShadowDenied: x.shadow})
	}
	return s
}

// merge sums list l over the buckets and returns its top n keys.
func (t *Tracker) merge(l, n int, total *int64) []Key {
	type agg struct {
		e          *entry // the newest bucket's entry
		count, err int64
		since      int64
		last, peak int64
	}
	m := map[uint64]*agg{}
	for age := range len(t.buckets) {
		s := t.buckets[(t.cur-age+len(t.buckets))%len(t.buckets)][l]
		*total += s.total
		for i := range s.entries {
			e := &s.entries[i]
			if e.count == 0 {
				continue
			}
			a := m[e.hash]
			if a == nil {
				a = &agg{e: e, since: e.since}
				m[e.hash] = a
			}
			a.count += e.count
			a.err += e.err
			a.since, a.last, a.peak = min(a.since, e.since), max(a.last, e.last), max(a.peak, e.peak)
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
	for _, a := range aggs[:min(n, len(aggs))] {
		k := Key{ID: t.id(a.e), Count: a.count, Error: a.err, Since: time.Unix(0, a.since).UTC(), Last: time.Unix(0, a.last).UTC(), Resettable: !a.e.long}
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

func (t *Tracker) id(e *entry) string {
	if e.long {
		return "sha256:" + hex.EncodeToString(e.digest[:])
	}
	return keyname.Of(e.keyString())
}
