package redisstore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// checkHead is the number of check.lua's ARGV before the hits' (now, cost,
// id, padding); hitArgCount the number per hit.
const (
	checkHead   = 4
	hitArgCount = 5
)

// call is one script call: the hits of a check that share a hash slot (all
// of them outside a Cluster).
type call struct {
	slot uint16
	hits []int    // indexes into Check.Hits
	keys []string // KEYS, one per hit
	args []string // check.lua's ARGV (nil for a reset)
}

// plan splits c into calls: one outside a Cluster, one per hash slot in
// ascending slot order inside. withArgs builds check.lua's ARGV.
func (s *Store) plan(c sluice.Check, withArgs bool) []call {
	n := len(c.Hits)
	var head [checkHead]string
	if withArgs {
		head = s.checkHead(c)
	}
	if n == 1 {
		return s.planOne(c, withArgs, head)
	}
	calls := make([]call, 0, 1)
	for i, h := range c.Hits {
		key, tag := stateKey(s.prefix, h, c.Group)
		var sl uint16
		if s.cluster {
			sl = slot(tag)
		}
		j := slices.IndexFunc(calls, func(cl call) bool { return cl.slot == sl })
		if j < 0 {
			calls = append(calls, call{slot: sl, hits: make([]int, 0, n), keys: make([]string, 0, n)})
			if withArgs {
				calls[len(calls)-1].args = append(make([]string, 0, checkHead+hitArgCount*n), head[:]...)
			}
			j = len(calls) - 1
		}
		cl := &calls[j]
		cl.hits, cl.keys = append(cl.hits, i), append(cl.keys, key)
		if withArgs {
			cl.args = appendHitArgs(cl.args, h, c.Shadow)
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
	args  [checkHead + hitArgCount]string
}

// planOne is plan for a check of one hit.
func (s *Store) planOne(c sluice.Check, withArgs bool, head [checkHead]string) []call {
	h := c.Hits[0]
	o := &oneHit{}
	key, tag := stateKey(s.prefix, h, c.Group)
	o.keys[0] = key
	cl := call{hits: o.hits[:], keys: o.keys[:]}
	if s.cluster {
		cl.slot = slot(tag)
	}
	if withArgs {
		cl.args = appendHitArgs(append(o.args[:0], head[:]...), h, c.Shadow)
	}
	o.calls[0] = cl
	return o.calls[:]
}

// checkHead returns check.lua's first ARGV: now, cost, the check's id,
// padding. Every call of one check shares them.
func (s *Store) checkHead(c sluice.Check) [checkHead]string {
	now := ""
	if s.now != nil {
		now = strconv.FormatInt(s.now().UnixMicro(), 10)
	}
	var buf [40]byte
	b := append(append(buf[:0], s.idPrefix...), '.')
	id := string(strconv.AppendUint(b, s.seq.Add(1), 36))
	return [checkHead]string{now, strconv.FormatInt(c.Cost, 10), id, s.padding}
}

// appendHitArgs appends one hit's part of check.lua's ARGV: algorithm
// code, rate, window µs, bucket µs, shadow flag.
func appendHitArgs(args []string, h sluice.Hit, shadow bool) []string {
	flag := "0"
	if shadow || h.Limit.Shadow {
		flag = "1"
	}
	// The three numbers share one string: one allocation instead of three.
	var buf [64]byte
	b := strconv.AppendInt(buf[:0], h.Limit.Rate, 10)
	i := len(b)
	b = strconv.AppendInt(b, h.Limit.Window.Microseconds(), 10)
	j := len(b)
	nums := string(strconv.AppendInt(b, h.Limit.Bucket().Microseconds(), 10))
	return append(args, algoCode[h.Limit.Algo()], nums[:i], nums[i:j], nums[j:], flag)
}

// runChecks decides every call within Options.Timeout and decodes the
// replies: a single call coalesced with other checks when batching is on
// (bounded by its batch call's deadline, with no timer per check), else
// through checkOne, several (a check across Cluster slots) with one
// check.lua call each, concurrently. A failed call's reply is the zero
// value (not allowed, so never refunded); the errors are joined.
func (s *Store) runChecks(ctx context.Context, calls []call) ([]checkReply, error) {
	replies := make([]checkReply, len(calls))
	if len(calls) == 1 && s.batcher != nil {
		var err error
		replies[0], err = s.batcher.do(ctx, calls[0], time.Now().Add(s.timeout))
		return replies, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if len(calls) == 1 {
		var err error
		replies[0], err = s.checkOne(ctx, calls[0])
		return replies, err
	}
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			raw, err := run(ctx, s.sc, s.scripts.check, calls[i].keys, calls[i].args)
			if err == nil {
				replies[i], err = decodeCheck(raw, len(calls[i].hits))
			}
			if errs[i] = err; err != nil {
				replies[i] = checkReply{} // not recorded
			}
		})
	}
	wg.Wait()
	return replies, errors.Join(errs...)
}

// decide fills d from the replies of every call of c.
func (s *Store) decide(c sluice.Check, calls []call, replies []checkReply, d *sluice.Decision) {
	n := len(c.Hits)
	d.Prepare(n)
	byHit, allowed := replies[0].hits, replies[0].allowed // one call: in hit order
	if len(calls) > 1 {
		byHit, allowed = make([]hitReply, n), true
		for k, cl := range calls {
			allowed = allowed && replies[k].allowed
			for j, i := range cl.hits {
				byHit[i] = replies[k].hits[j]
			}
		}
	}
	recorded := allowed && c.Cost > 0
	for i, h := range c.Hits {
		shadow := c.Shadow || h.Limit.Shadow
		d.Hits[i] = result(h, shadow, byHit[i], recorded)
	}
	d.Conclude(sluice.FromStore)
}
