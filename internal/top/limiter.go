package top

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// MaxTrackers bounds the trackers of a Set: the zones of a configuration
// and the domains of the rate-limit service are far fewer.
const MaxTrackers = 256

// Set holds one Tracker per zone name (a Hit's Zone). It is safe for
// concurrent use; looking a tracker up takes no lock.
type Set struct {
	opts Options
	// below is the sampling threshold: an allowed check is observed when
	// a 32-bit random number is below it, ⌈2^32/Sample⌉.
	below uint64
	clock atomic.Int64
	// floor is a shift that every shard of every tracker of the set that
	// is not idle is at least under (Options.Budget), most of the time: a
	// Limiter draws a check with probability 2^-floor before it looks for
	// the check's tracker, so that under a flood a check not drawn costs
	// no lookup and no shard. Run raises it on each tick to the smallest
	// shift of the shards that observed something in the current or the
	// previous second (0 if none did), so that a flood observed on fewer
	// processors than a tracker has shards raises it too; a shard that
	// lowers its shift, one that observes again after an idle second,
	// and a new tracker lower it at once. Between a tick's scan and its
	// store a shard may lower its shift unseen, and an idle shard's
	// checks are drawn at the floor until one is drawn: meanwhile its
	// checks are observed at the floor's rate, counted as many times (an
	// unbiased estimate still).
	floor atomic.Uint32
	mu    sync.Mutex // serializes changes of m
	m     atomic.Pointer[trackers]
	// shards is the number of shards of the set's trackers; 0 for New's
	// (GOMAXPROCS, at most MaxShards). Tests set it.
	shards int
}

// trackers are the trackers of a Set, by name: m, and its first few in
// a slice, which a lookup scans before it hashes the name (for the few
// zones of most sets, a string comparison or two instead of a map's hash).
type trackers struct {
	m   map[string]*Tracker
	few []named
}

type named struct {
	name string
	t    *Tracker
}

// fewTrackers is how many trackers a lookup compares names with before
// it hashes.
const fewTrackers = 4

// storeTrackers makes m the set's trackers.
func (s *Set) storeTrackers(m map[string]*Tracker) {
	ts := &trackers{m: m}
	for name, t := range m {
		if len(ts.few) == fewTrackers {
			break
		}
		ts.few = append(ts.few, named{name, t})
	}
	s.m.Store(ts)
}

// NewSet returns an empty Set whose trackers use opts (ShowKeys is set
// per zone by Configure).
func NewSet(opts Options) (*Set, error) {
	if _, err := New(opts); err != nil { // validate once
		return nil, err
	}
	opts.defaults()
	s := &Set{opts: opts, below: (1<<32 + uint64(opts.Sample) - 1) / uint64(opts.Sample)}
	s.storeTrackers(map[string]*Tracker{})
	return s, nil
}

// Run keeps the set's clock until ctx ends, reading Options.Now every
// Options.Tick, so that observations do not each read the clock (a
// system call on some virtual machines), and on each tick ends the
// trackers' floods (Options.Budget) that lapsed. Observations made while
// Run is not running read Now themselves.
func (s *Set) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.Tick)
	defer t.Stop()
	defer s.clock.Store(0)
	for {
		now := s.opts.Now().UnixNano()
		s.clock.Store(now)
		old, floor, active := s.floor.Load(), uint32(maxShift), false
		for _, tr := range s.m.Load().m {
			tr.lapse(now) // for Tracker.shift
			if m, ok := tr.minShift(now); ok {
				floor, active = min(floor, m), true
			}
		}
		if !active {
			floor = 0
		}
		s.floor.CompareAndSwap(old, floor) // unless lowered meanwhile
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// newTracker makes a tracker on the set's clock.
func (s *Set) newTracker(show bool) (*Tracker, error) {
	opts := s.opts
	opts.ShowKeys = show
	n := s.shards
	if n == 0 {
		n = min(runtime.GOMAXPROCS(0), MaxShards)
	}
	t, err := newTracker(opts, n)
	if err == nil {
		t.clock = &s.clock
		t.floor = &s.floor
		s.floor.Store(0) // its shards sample nothing yet
	}
	return t, err
}

// Tracker returns the tracker of zone, or nil.
func (s *Set) Tracker(zone string) *Tracker {
	ts := s.m.Load()
	for i := range ts.few {
		if ts.few[i].name == zone {
			return ts.few[i].t
		}
	}
	if len(ts.few) == len(ts.m) {
		return nil
	}
	return ts.m[zone]
}

// Names returns the names of the trackers, sorted.
func (s *Set) Names() []string {
	m := s.m.Load().m
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Configure makes the set track exactly zones (name → show keys), plus
// the trackers whose names start with one of keep (made by Add): a
// tracker of a zone that stays is kept with its counts unless its
// ShowKeys changes; the others are dropped.
func (s *Set) Configure(zones map[string]bool, keep ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m.Load().m
	m := make(map[string]*Tracker, len(zones))
	for name, show := range zones {
		if t := old[name]; t != nil && t.opts.ShowKeys == show {
			m[name] = t
			continue
		}
		t, err := s.newTracker(show)
		if err != nil {
			return err
		}
		m[name] = t
	}
	for name, t := range old {
		if m[name] == nil && slices.ContainsFunc(keep, func(p string) bool { return strings.HasPrefix(name, p) }) {
			m[name] = t
		}
	}
	s.storeTrackers(m)
	return nil
}

// Add returns the tracker of name, making one (keys shown as digests) if
// there is none and the set holds fewer than MaxTrackers; nil otherwise.
func (s *Set) Add(name string) *Tracker {
	if t := s.Tracker(name); t != nil {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m.Load().m
	if t := old[name]; t != nil || len(old) >= MaxTrackers {
		return t
	}
	t, err := s.newTracker(false)
	if err != nil {
		return nil // validated by NewSet
	}
	m := make(map[string]*Tracker, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = t
	s.storeTrackers(m)
	return t
}

// Limiter is a sluice.Limiter that reports every decision of Next to the
// trackers of its Set, by each hit's Zone. Zones without a tracker are
// not tracked, unless AddPrefix is set and the zone name starts with it
// (then a tracker is added: the rate-limit service's domains).
type Limiter struct {
	Next      sluice.Limiter
	Set       *Set
	AddPrefix string
}

var _ sluice.Limiter = (*Limiter)(nil)

// checkFields are the fields of sluice.Check: the conversion below fails
// to compile when Check gains one, which Limiter.Check would then have
// to pass on.
type checkFields struct {
	Hits   []sluice.Hit
	Cost   int64
	Group  string
	Shadow bool
}

var _ = sluice.Check(checkFields{})

// Check checks c with Next, then observes the decision. Errors (nothing
// decided) are not observed.
func (l *Limiter) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	// A check without Group and Shadow, the common one, is passed on as
	// a literal of its two other fields, not as c: the compiler then
	// writes Next's argument word by word from words it loads one by one,
	// where it copies c in 16-byte moves. A 16-byte load of words the
	// caller has just stored 8 bytes at a time cannot be forwarded from
	// those stores and waits until they reach the cache, which the
	// caller's own work can delay: on BenchmarkLimiterRatio that wait was
	// most of what tracking cost (docs/server.md). checkFields stops the
	// build if Check gains a field this literal would drop.
	var err error
	if c.Group == "" && !c.Shadow {
		err = l.Next.Check(ctx, sluice.Check{Hits: c.Hits, Cost: c.Cost}, d)
	} else {
		err = l.Next.Check(ctx, c, d)
	}
	if err != nil {
		return err
	}
	// The common check, as Set.common, tested here, inlined: one allowed
	// hit below Near. It is observed only when drawn.
	// Under a flood (Set.floor), one check in 2^floor is drawn first,
	// and only those go on.
	s := l.Set
	if len(c.Hits) == 1 && len(d.Hits) == 1 && c.Cost > 0 {
		if d.Allowed && d.Hits[0].Allowed && d.Hits[0].Used < s.opts.Near*float64(c.Hits[0].Limit.Rate) {
			r := cheaprand()
			if pre := s.floor.Load() & 31; uint64(r) < s.below>>pre {
				s.sampled(&c, d, l.AddPrefix, pre)
			}
			return nil
		}
		if pre := s.floor.Load() & 31; pre == 0 || cheaprand()&(1<<pre-1) == 0 {
			s.observeOne(&c, d, l.AddPrefix, pre)
		}
		return nil
	}
	s.observe(&c, d, l.AddPrefix)
	return nil
}

// Reset resets c with Next, then removes its keys from the lists.
func (l *Limiter) Reset(ctx context.Context, c sluice.Check) error {
	err := l.Next.Reset(ctx, c)
	if err == nil {
		l.Set.Forget(c)
	}
	return err
}

// Forget removes the keys of c's hits from their zones' lists.
func (s *Set) Forget(c sluice.Check) {
	for i, h := range c.Hits {
		if i > 0 && c.Hits[i-1].Zone == h.Zone && c.Hits[i-1].Key == h.Key {
			continue
		}
		if t := s.Tracker(h.Zone); t != nil {
			t.Forget(h.Key)
		}
	}
}

// Observe reports the decision d of c (not an error: nothing was
// decided) to the trackers of the hits' zones. Peeks (Cost 0) are not
// observed. It does not allocate.
func (s *Set) Observe(c sluice.Check, d *sluice.Decision) {
	if common, drawn := s.common(&c, d); !common && len(c.Hits) == 1 {
		s.observeOne(&c, d, "", 0)
	} else if !common {
		s.observe(&c, d, "")
	} else if drawn {
		s.sampled(&c, d, "", 0)
	}
}

// common reports whether c is a peek or the common check, one allowed
// hit below Near, decided from the decision alone with nothing shared
// written; and if so whether it is drawn to be observed (sampled), with
// probability 1/Options.Sample (within 2^-32).
func (s *Set) common(c *sluice.Check, d *sluice.Decision) (common, drawn bool) {
	if c.Cost <= 0 {
		return true, false
	}
	if len(c.Hits) != 1 || len(d.Hits) != 1 {
		return false, false
	}
	hr := &d.Hits[0]
	// Used < Near × Rate is false for a Rate of 0 (an invalid hit).
	if !d.Allowed || !hr.Allowed || !(hr.Used < s.opts.Near*float64(c.Hits[0].Limit.Rate)) {
		return false, false
	}
	return true, uint64(cheaprand()) < s.below
}

// sampled observes the common check c (see common), drawn to stand for
// Options.Sample checks, and drawn besides with probability 2^-pre
// (Set.floor).
func (s *Set) sampled(c *sluice.Check, d *sluice.Decision, add string, pre uint32) {
	h := &c.Hits[0]
	s.record(h, Allowed, c.Cost, d.Hits[0].Used/float64(h.Limit.Rate), int64(s.opts.Sample), add, pre)
}

// observe reports d to the trackers, once per run of hits with the same
// zone and key (a key's limits): every denial and near-limit check, and
// one in Options.Sample of the other allowed checks, drawn at random
// (and under a flood, one in 2^shift of those: Options.Budget).
// A zone without a tracker whose name starts with add (if not empty)
// gets one.
func (s *Set) observe(c *sluice.Check, d *sluice.Decision, add string) {
	if c.Cost <= 0 {
		return
	}
	for i := 0; i < len(c.Hits); {
		h := &c.Hits[i]
		j := i + 1
		for j < len(c.Hits) && c.Hits[j].Zone == h.Zone && c.Hits[j].Key == h.Key {
			j++
		}
		r, usage := result(c, d, i, j)
		scale := int64(1)
		if r == Allowed && usage < s.opts.Near {
			if uint64(cheaprand()) >= s.below {
				i = j
				continue
			}
			scale = int64(s.opts.Sample)
		}
		s.record(h, r, c.Cost, usage, scale, add, 0)
		i = j
	}
}

// record reports one key's result to its zone's tracker, adding one if
// the zone starts with add; the check was drawn already with probability
// 2^-pre.
func (s *Set) record(h *sluice.Hit, r Result, cost int64, usage float64, scale int64, add string, pre uint32) {
	if t := s.trackerOf(h.Zone, add); t != nil {
		t.observe(h.Key, r, cost, usage, scale, pre)
	}
}

// trackerOf returns the tracker of zone, adding one if there is none and
// the zone starts with add (if not empty); nil if none.
func (s *Set) trackerOf(zone, add string) *Tracker {
	t := s.Tracker(zone)
	if t == nil && add != "" && strings.HasPrefix(zone, add) {
		t = s.Add(zone)
	}
	return t
}

// observeOne is observe for a check of one hit (Cost > 0) that is not
// the common check (a denial, a near-limit check, one decided without
// the limiters' state), drawn already with probability 2^-pre
// (Set.floor): the tracker is found and the rest of the flood draw made
// (Options.Budget) before the rest is paid.
func (s *Set) observeOne(c *sluice.Check, d *sluice.Decision, add string, pre uint32) {
	h := &c.Hits[0]
	t := s.trackerOf(h.Zone, add)
	if t == nil {
		return
	}
	sh, k, ok := t.draw(pre)
	if !ok {
		return
	}
	r, usage := result(c, d, 0, 1)
	scale := int64(1)
	if r == Allowed && usage < s.opts.Near { // a Rate of 0
		if uint64(cheaprand()) >= s.below {
			return
		}
		scale = int64(s.opts.Sample)
	}
	t.observeShard(sh, k, h.Key, r, c.Cost, usage, scale<<k)
}

// result is what d means for hits [i, j) of c, and their highest usage.
func result(c *sluice.Check, d *sluice.Decision, i, j int) (Result, float64) {
	if len(d.Hits) != len(c.Hits) { // decided without the limiters' state
		if d.Allowed {
			return Allowed, 0
		}
		return Denied, 0
	}
	denied, shadow, usage := false, false, 0.0
	for k := i; k < j; k++ {
		hr := &d.Hits[k]
		if rate := c.Hits[k].Limit.Rate; rate > 0 {
			usage = max(usage, hr.Used/float64(rate))
		}
		if !hr.Allowed {
			if hr.Shadow {
				shadow = true
			} else {
				denied = true
			}
		}
	}
	switch {
	case denied:
		return Denied, usage
	case !d.Allowed:
		return Refused, usage
	case shadow:
		return ShadowDenied, usage
	}
	return Allowed, usage
}
