package redisstore

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/ident"
)

// spec is a hit's limit as decide.lua reads it. Hits of one script call
// with equal specs share one entry of the call's limit list.
type spec struct {
	code                 byte // ident.Algo.Code
	rate, window, bucket int64
	shadow               bool
}

// specOf returns the spec of a hit whose state is st.
func specOf(h sluice.Hit, st ident.State, shadow bool) spec {
	return spec{
		code: st.Limit.Code, rate: h.Limit.Rate,
		window: st.Limit.Window, bucket: st.Limit.Bucket,
		shadow: shadow || h.Limit.Shadow,
	}
}

// snapLen is the length of a hit's part of decide.lua's reply: fits, then
// its algorithm's snapshot.
func (p spec) snapLen() int {
	switch p.code {
	case 'g':
		return 3
	case 'b':
		return 3 + int(p.window/p.bucket)
	}
	return 4
}

func (p spec) params() algo.Params {
	return algo.Params{Rate: p.rate, Window: p.window, Bucket: p.bucket}
}

// encode returns decide.lua's KEYS and ARGV for checks, in order: now ("" for
// the server's TIME), padding, the call's id, the distinct limits, then
// each check's cost, hit count and limit numbers.
func encode(now, padding, id string, checks []*call) (keys, args []string) {
	nk := 0
	for _, cl := range checks {
		nk += len(cl.keys)
	}
	keys = make([]string, 0, nk)
	var limits []spec
	refs := make([]int, 0, nk)
	for _, cl := range checks {
		keys = append(keys, cl.keys...)
		for _, sp := range cl.specs {
			k := 0
			for k < len(limits) && limits[k] != sp {
				k++
			}
			if k == len(limits) {
				limits = append(limits, sp)
			}
			refs = append(refs, k+1)
		}
	}
	args = make([]string, 0, 4+5*len(limits)+2*len(checks)+nk)
	args = append(args, now, padding, id, strconv.Itoa(len(limits)))
	for _, sp := range limits {
		shadow := "0"
		if sp.shadow {
			shadow = "1"
		}
		args = append(args, string(sp.code), strconv.FormatInt(sp.rate, 10),
			strconv.FormatInt(sp.window, 10), strconv.FormatInt(sp.bucket, 10), shadow)
	}
	i := 0
	for _, cl := range checks {
		args = append(args, strconv.FormatInt(cl.cost, 10), strconv.Itoa(len(cl.keys)))
		for range cl.keys {
			args = append(args, strconv.Itoa(refs[i]))
			i++
		}
	}
	return keys, args
}

// hitReply is one hit's part of decide.lua's reply: whether it fit, and
// its state as read before the check (a slice of the reply).
type hitReply struct {
	fits bool
	snap []int64
}

// checkReply is one check's part of decide.lua's reply, decoded.
type checkReply struct {
	allowed bool  // every non-shadow hit of the call fit
	now     int64 // µs the script decided at
	id      string
	hits    []hitReply
}

// errCheckFailed is a check that failed inside the script, alone: the
// script's pcall caught an error on its keys, such as WRONGTYPE on a key
// of another type under the prefix.
var errCheckFailed = fmt.Errorf("%w: the script failed on this check's keys (a key of another type under the prefix?)", sluice.ErrBadState)

// decoder walks decide.lua's reply, check by check: the one function that
// checks and decodes it. Any deviation is an error, never a guess.
type decoder struct {
	raw []int64
	off int
}

func newDecoder(raw []int64) (*decoder, error) {
	if len(raw) < 1 || raw[0] <= 0 {
		return nil, fmt.Errorf("decide script replied %v: no time first", raw[:min(len(raw), 1)])
	}
	return &decoder{raw: raw, off: 1}, nil
}

// next decodes the part of the check cl.
func (d *decoder) next(cl *call) (checkReply, error) {
	n := 1
	for _, sp := range cl.specs {
		n += sp.snapLen()
	}
	if d.off+n > len(d.raw) {
		return checkReply{}, fmt.Errorf("decide script replied %d values, too few for its checks", len(d.raw))
	}
	part := d.raw[d.off : d.off+n]
	d.off += n
	switch part[0] {
	case -1:
		return checkReply{}, errCheckFailed
	case 0, 1:
	default:
		return checkReply{}, fmt.Errorf("decide script: allowed is %d", part[0])
	}
	r := checkReply{allowed: part[0] == 1, now: d.raw[0], hits: make([]hitReply, len(cl.specs))}
	k := 1
	for i, sp := range cl.specs {
		m := sp.snapLen()
		if f := part[k]; f != 0 && f != 1 {
			return checkReply{}, fmt.Errorf("decide script: fits is %d", f)
		}
		r.hits[i] = hitReply{fits: part[k] == 1, snap: part[k+1 : k+m]}
		k += m
	}
	return r, nil
}

// done reports an error if the reply has values left over.
func (d *decoder) done() error {
	if d.off != len(d.raw) {
		return fmt.Errorf("decide script replied %d values, %d more than its checks", len(d.raw), len(d.raw)-d.off)
	}
	return nil
}

// result computes one hit's HitResult from the state the script read,
// with internal/algo, the code the memory store runs: the script only
// decides (fits) and writes. recorded tells whether the check's cost was
// recorded on the hit.
func result(sp spec, r hitReply, now, cost int64, recorded bool) sluice.HitResult {
	p := sp.params()
	var used float64
	var retry, reset int64
	if sp.code == 'l' {
		// used, retry_after, newest event: log.lua computes them.
		used, retry = float64(r.snap[0]), r.snap[1]
		if newest := r.snap[2]; newest > 0 {
			reset = max(0, newest+p.Window-now)
		}
		if recorded {
			used, reset = used+float64(cost), max(now, r.snap[2])+p.Window-now
		}
	} else {
		st := snapshotState(sp.code, r.snap)
		res := st.Eval(p, now, cost)
		used, retry, reset = res.Used, res.RetryAfter, res.ResetAfter
		if recorded {
			used, reset = st.Record(p, now, cost)
		}
	}
	switch {
	case r.fits:
		retry = 0
	case retry == 0:
		retry = 1 // decay at its boundary: Lua's exp and Go's differ by an ulp
	}
	return sluice.HitResult{
		Allowed:    r.fits,
		Shadow:     sp.shadow,
		Used:       used,
		Remaining:  algo.Remaining(sp.rate, used),
		RetryAfter: time.Duration(retry) * time.Microsecond,
		ResetAfter: time.Duration(reset) * time.Microsecond,
	}
}

// snapshotState returns the algo state of a snapshot (see the algorithm
// files in scripts/).
func snapshotState(code byte, s []int64) algo.State {
	switch code {
	case 'w':
		return &algo.Window{Index: s[0], Cur: s[1], Prev: s[2]}
	case 'g':
		return &algo.GCRA{TAT: s[0], Frac: s[1]}
	case 'd':
		st := &algo.Decay{T0: s[2]}
		if s[0] != 0 {
			st.S = math.Ldexp(float64(s[0]), int(s[1])-53)
		}
		return st
	case 'b':
		if s[0] == 0 {
			return &algo.Buckets{}
		}
		return &algo.Buckets{Head: s[0], Counts: s[1:]}
	}
	panic("redisstore: unknown algorithm code " + string(code))
}
