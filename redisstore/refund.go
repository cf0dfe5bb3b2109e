package redisstore

import (
	"context"
	"strconv"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
)

// toRefund returns the calls that recorded the cost although the check as
// a whole was not allowed: another slot denied, or another call failed.
func (s *Store) toRefund(c sluice.Check, calls []call, replies []checkReply, err error) []int {
	if len(calls) < 2 || c.Cost == 0 {
		return nil
	}
	all := err == nil
	for _, r := range replies {
		all = all && r.allowed
	}
	if all {
		return nil
	}
	var recorded []int
	for k, r := range replies {
		if r.allowed { // a failed call's reply is the zero value: not allowed
			recorded = append(recorded, k)
		}
	}
	return recorded
}

// refund runs refund.lua for the calls in which, so that a check denied in
// one slot leaves nothing recorded in the others. It runs even when the
// caller's context is done (with its own timeout): a refund left undone
// over-counts until the keys expire. Failures are logged, not returned: the
// decision stands, and the error only makes later checks stricter.
func (s *Store) refund(ctx context.Context, c sluice.Check, calls []call, replies []checkReply, which []int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	for _, k := range which {
		cl := calls[k]
		args := []string{strconv.FormatInt(replies[k].now, 10), strconv.FormatInt(c.Cost, 10), replies[k].id}
		for j, sp := range cl.specs {
			at := replies[k].now // where decide.lua recorded, for every state but these
			if sp.code == 'w' || sp.code == 'b' {
				at = algo.RecordedAt(snapshotState(sp.code, replies[k].hits[j].snap), sp.params(), at)
			}
			args = append(args, string(sp.code), strconv.FormatInt(sp.rate, 10),
				strconv.FormatInt(sp.window, 10), strconv.FormatInt(sp.bucket, 10), strconv.FormatInt(at, 10))
		}
		if _, err := run(ctx, s.sc, s.scripts.refund, cl.keys, args); err != nil {
			s.log.Warn("redisstore: refund failed; the cost stays recorded until the keys expire",
				"check", describe(c), "slot", cl.slot, "err", err)
		}
	}
}
