package rls

import (
	"context"

	"github.com/sluicehq/sluice"
)

// MaxLimitedDescriptors bounds the descriptors with a limit in one request.
// Up to sluice.MaxHits of them are one check; more are decided as several
// checks (checkAll). Past this bound a request is not checked at all: its
// limited descriptors are OVER_LIMIT (see Service.oversized), because an
// error would let Envoy's default failure_mode_deny: false pass it
// unlimited.
const MaxLimitedDescriptors = 256

// checkAll decides c, which may have more hits than one sluice check
// takes. Up to sluice.MaxHits hits are one all-or-nothing check. Beyond,
// the hits are split into checks of at most sluice.MaxHits: a peek of
// every hit first (cost 0, nothing recorded) finds the short ones, without
// room for the cost. They are checked first, with the cost, in checks of
// short hits only, which are denied and record nothing; every other check
// after a denial only peeks. So a request that one hit denies records
// nothing, as one check would, and every hit reports its own state. Only
// when usage changes between the peek and the checks (another request took
// the room, or freed it) can a check record its cost on a request that
// another check denies; then those hits keep it, as every hit of
// envoyproxy/ratelimit does on a denial.
func checkAll(ctx context.Context, lim sluice.Limiter, c sluice.Check, d *sluice.Decision) error {
	if len(c.Hits) <= sluice.MaxHits {
		return lim.Check(ctx, c, d)
	}
	order := make([]int, 0, len(c.Hits)) // the indexes in c.Hits, in checking order
	isShort := make([]bool, len(c.Hits))
	if c.Cost > 0 && !c.Shadow {
		peek := c
		peek.Cost = 0
		all := make([]int, len(c.Hits))
		for i := range all {
			all[i] = i
		}
		if err := checkChunks(ctx, lim, peek, all, 0, d); err != nil {
			return err
		}
		if len(d.Hits) == len(c.Hits) {
			for i, h := range d.Hits {
				if !h.Shadow && h.Remaining < c.Cost {
					order = append(order, i)
					isShort[i] = true
				}
			}
		}
	}
	short := len(order) // order[:short] are the short hits
	for i := range c.Hits {
		if !isShort[i] {
			order = append(order, i)
		}
	}
	return checkChunks(ctx, lim, c, order, short, d)
}

// checkChunks decides c's hits as consecutive checks of at most
// sluice.MaxHits, in the given order, the first short of them (short hits)
// in checks of their own. A check of short hits is made with the cost;
// any other, once a check was denied, peeks. It writes one decision over
// all the hits to d, in c's order. A check decided without the store's
// state (by a failure policy) makes the whole decision one without hit
// results.
func checkChunks(ctx context.Context, lim sluice.Limiter, c sluice.Check, order []int, short int, d *sluice.Decision) error {
	d.Prepare(len(c.Hits))
	var part sluice.Decision
	sub := c
	sub.Hits = make([]sluice.Hit, 0, sluice.MaxHits)
	allowed, src := true, sluice.Undecided
	for from := 0; from < len(order); {
		to := min(from+sluice.MaxHits, len(order))
		if from < short {
			to = min(to, short)
		}
		idx := order[from:to]
		sub.Hits = sub.Hits[:0]
		for _, i := range idx {
			sub.Hits = append(sub.Hits, c.Hits[i])
		}
		sub.Cost = c.Cost
		if !allowed && from >= short {
			sub.Cost = 0
		}
		if err := lim.Check(ctx, sub, &part); err != nil {
			return err
		}
		if len(part.Hits) != len(sub.Hits) { // decided by a failure policy
			d.Degrade(part.Source, part.Allowed, part.RetryAfter())
			return nil
		}
		for j, i := range idx {
			d.Hits[i] = part.Hits[j]
		}
		allowed = allowed && part.Allowed
		src = max(src, part.Source)
		from = to
	}
	d.Conclude(src)
	return nil
}

// checkGroups decides c, whose hits ask for different costs (costs[i] is
// hit i's: descriptors with different hits_addend), as one check per cost,
// all or nothing wherever the store's state allows it, as checkAll decides
// a split check. A peek of every group first (cost 0, nothing recorded)
// finds the enforced hits short of their cost. They are checked first,
// with their group's cost, in checks of short hits only, which are denied
// and record nothing; then the other hits of each group, with its cost,
// or, once a check was denied, as a peek. So a request that one hit
// denies records nothing. Only when usage changes between the peek and the
// checks (another request took the room) can a group be recorded on a
// request another denies; those counters then keep it. In shadow mode
// (c.Shadow) nothing denies: each group is checked once.
func checkGroups(ctx context.Context, lim sluice.Limiter, c sluice.Check, costs []int64, d *sluice.Decision) error {
	var order []int64 // the costs, in the order of their first hit
	groups := map[int64][]int{}
	for i, cost := range costs {
		if groups[cost] == nil {
			order = append(order, cost)
		}
		groups[cost] = append(groups[cost], i)
	}
	d.Prepare(len(c.Hits))
	src := sluice.Undecided
	var part sluice.Decision
	// run checks the hits idx of c at cost into d.Hits; degraded reports a
	// decision made without hit results (by a failure policy), then in d.
	run := func(idx []int, cost int64) (degraded bool, err error) {
		sub := sluice.Check{Cost: cost, Shadow: c.Shadow, Group: c.Group, Hits: make([]sluice.Hit, 0, len(idx))}
		for _, i := range idx {
			sub.Hits = append(sub.Hits, c.Hits[i])
		}
		if err := checkAll(ctx, lim, sub, &part); err != nil {
			return false, err
		}
		if len(part.Hits) != len(sub.Hits) {
			d.Degrade(part.Source, part.Allowed, part.RetryAfter())
			return true, nil
		}
		for j, i := range idx {
			d.Hits[i] = part.Hits[j]
		}
		src = max(src, part.Source)
		return false, nil
	}
	isShort := make([]bool, len(c.Hits))
	for _, cost := range order {
		if c.Shadow {
			break
		}
		if degraded, err := run(groups[cost], 0); degraded || err != nil {
			return err
		}
		for _, i := range groups[cost] {
			isShort[i] = !d.Hits[i].Shadow && d.Hits[i].Remaining < cost
		}
	}
	denied := false
	for _, short := range []bool{true, false} {
		for _, cost := range order {
			var idx []int
			for _, i := range groups[cost] {
				if isShort[i] == short {
					idx = append(idx, i)
				}
			}
			if len(idx) == 0 {
				continue
			}
			if denied && !short {
				cost = 0
			}
			if degraded, err := run(idx, cost); degraded || err != nil {
				return err
			}
			denied = denied || !part.Allowed
		}
	}
	d.Conclude(src)
	return nil
}
