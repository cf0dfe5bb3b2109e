package redisstore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/sluicehq/sluice"
)

// call is one check's part decided by one script call: the hits of a check
// that share a hash slot (all of them outside a Cluster).
type call struct {
	slot  uint16
	hits  []int    // indexes into Check.Hits
	keys  []string // KEYS, one per hit
	specs []spec   // the hits' limits (nil for a reset)
	cost  int64
}

// plan splits c into calls: one outside a Cluster, one per hash slot in
// ascending slot order inside. withSpecs fills the hits' limits.
func (s *Store) plan(c sluice.Check, withSpecs bool) []call {
	n := len(c.Hits)
	if n == 1 {
		return s.planOne(c, withSpecs)
	}
	calls := make([]call, 0, 1)
	for i, h := range c.Hits {
		st := stateOf(h, c.Group)
		key, tag := stateKey(s.prefix, st)
		var sl uint16
		if s.cluster {
			sl = slot(tag)
		}
		j := slices.IndexFunc(calls, func(cl call) bool { return cl.slot == sl })
		if j < 0 {
			calls = append(calls, call{slot: sl, hits: make([]int, 0, n), keys: make([]string, 0, n), cost: c.Cost})
			j = len(calls) - 1
		}
		cl := &calls[j]
		cl.hits, cl.keys = append(cl.hits, i), append(cl.keys, key)
		if withSpecs {
			cl.specs = append(cl.specs, specOf(h, st, c.Shadow))
		}
	}
	slices.SortFunc(calls, func(a, b call) int { return int(a.slot) - int(b.slot) })
	return calls
}

// oneHit holds the only call of a one-hit check, the common case, with
// its slices' arrays: one allocation instead of four.
type oneHit struct {
	calls [1]call
	hits  [1]int
	keys  [1]string
	specs [1]spec
}

// planOne is plan for a check of one hit.
func (s *Store) planOne(c sluice.Check, withSpecs bool) []call {
	h := c.Hits[0]
	o := &oneHit{}
	st := stateOf(h, c.Group)
	key, tag := stateKey(s.prefix, st)
	o.keys[0] = key
	cl := call{hits: o.hits[:], keys: o.keys[:], cost: c.Cost}
	if s.cluster {
		cl.slot = slot(tag)
	}
	if withSpecs {
		o.specs[0] = specOf(h, st, c.Shadow)
		cl.specs = o.specs[:]
	}
	o.calls[0] = cl
	return o.calls[:]
}

// callID returns a new id for one script call: the Store's random prefix
// and a counter. It names the call's log members.
func (s *Store) callID() string {
	var buf [40]byte
	b := append(append(buf[:0], s.idPrefix...), '.')
	return string(strconv.AppendUint(b, s.seq.Add(1), 36))
}

// nowArg is decide.lua's ARGV[1]: Options.Now in µs, or "" for the
// server's TIME.
func (s *Store) nowArg() string {
	if s.now == nil {
		return ""
	}
	return strconv.FormatInt(s.now().UnixMicro(), 10)
}

// decideCalls runs one decide.lua call for checks (each a call of its own
// check) and decodes each check's reply; a check the script failed on
// fails alone.
func (s *Store) decideCalls(ctx context.Context, checks []*call) ([]checkReply, []error, error) {
	id := s.callID()
	keys, args := encode(s.nowArg(), s.padding, id, checks)
	raw, err := run(ctx, s.sc, s.scripts.decide, keys, args)
	if err != nil {
		return nil, nil, err
	}
	dec, err := newDecoder(raw)
	if err != nil {
		return nil, nil, err
	}
	replies, errs := make([]checkReply, len(checks)), make([]error, len(checks))
	for i, cl := range checks {
		if replies[i], errs[i] = dec.next(cl); errs[i] == nil {
			replies[i].id = id + "." + strconv.Itoa(i+1)
		} else if errs[i] != errCheckFailed {
			return nil, nil, errs[i]
		}
	}
	if err := dec.done(); err != nil {
		return nil, nil, err
	}
	return replies, errs, nil
}

// checkOne decides the check of one call with a decide.lua call of its own.
func (s *Store) checkOne(ctx context.Context, cl *call) (checkReply, error) {
	replies, errs, err := s.decideCalls(ctx, []*call{cl})
	if err != nil {
		return checkReply{}, err
	}
	return replies[0], errs[0]
}

// runChecks decides every call within Options.Timeout: a single call
// coalesced with other checks when batching is on, else with a decide.lua
// call of its own, several (a check across Cluster slots) concurrently. A
// failed call's reply is the zero value (not allowed, so never refunded);
// the errors are joined.
func (s *Store) runChecks(ctx context.Context, calls []call) ([]checkReply, error) {
	replies := make([]checkReply, len(calls))
	if len(calls) == 1 && s.batcher != nil {
		var err error
		replies[0], err = s.batcher.do(ctx, &calls[0])
		return replies, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if len(calls) == 1 {
		var err error
		replies[0], err = s.checkOne(ctx, &calls[0])
		return replies, err
	}
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			if replies[i], errs[i] = s.checkOne(ctx, &calls[i]); errs[i] != nil {
				replies[i] = checkReply{} // not recorded
			}
		})
	}
	wg.Wait()
	return replies, errors.Join(errs...)
}

// decide fills d from the replies of every call of c: each hit's result
// from its snapshot, then d.Conclude.
func (s *Store) decide(c sluice.Check, calls []call, replies []checkReply, d *sluice.Decision) {
	d.Prepare(len(c.Hits))
	allowed := true
	for _, r := range replies {
		allowed = allowed && r.allowed
	}
	recorded := allowed && c.Cost > 0
	for k, cl := range calls {
		r := &replies[k]
		for j, i := range cl.hits {
			d.Hits[i] = result(cl.specs[j], r.hits[j], r.now, c.Cost, recorded)
		}
	}
	d.Conclude(sluice.FromStore)
}
