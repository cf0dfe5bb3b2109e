package algo

import "math"

// Refunder is implemented by every state: Refund takes back a cost that
// Record added, as far as the state still holds it. at is RecordedAt of
// the state as it was before that Record: the instant whose window (or
// bucket) the cost went into, which a clock behind the state moves
// forward, and which later records (other checks moving the state into
// a newer window) no longer tell. redisstore
// refunds the slots of a check across Redis Cluster slots that recorded
// although another slot denied; the scripts (the *_refund functions in
// redisstore/scripts) do what these methods do, and the model test holds
// them together.
type Refunder interface {
	Refund(p Params, at, cost int64)
}

var (
	_ Refunder = (*Window)(nil)
	_ Refunder = (*Buckets)(nil)
	_ Refunder = (*Log)(nil)
	_ Refunder = (*Decay)(nil)
	_ Refunder = (*GCRA)(nil)
)

// RecordedAt returns the instant a Record at now puts its cost at, for
// Refund: now, or for a sliding window or buckets whose state is ahead of
// now (a clock behind), the start of the state's window or newest bucket,
// where Record puts it. st is the state before the Record.
func RecordedAt(st State, p Params, now int64) int64 {
	switch s := st.(type) {
	case *Window:
		return max(now, s.Index*p.Window)
	case *Buckets:
		if len(s.Counts) > 0 {
			return max(now, s.Head*p.Bucket)
		}
	}
	return now
}

// Refund implements Refunder: it takes cost from the window of at (see
// RecordedAt) while the state still keeps it, never below zero.
func (s *Window) Refund(p Params, at, cost int64) {
	switch i := floorDiv(at, p.Window); i {
	case s.Index:
		s.Cur = max(0, s.Cur-cost)
	case s.Index - 1:
		s.Prev = max(0, s.Prev-cost)
	}
}

// Refund implements Refunder: it takes cost from the bucket of at (see
// RecordedAt), if the ring still holds it, never below zero.
func (s *Buckets) Refund(p Params, at, cost int64) {
	n := int64(len(s.Counts))
	k := floorDiv(at, p.Bucket)
	if n == 0 || k > s.Head || k <= s.Head-n {
		return
	}
	slot := floorMod(k, n)
	s.Counts[slot] = max(0, s.Counts[slot]-cost)
}

// Refund implements Refunder: it takes cost from the newest event, where
// Record put it, and drops the event when nothing is left of it.
func (s *Log) Refund(p Params, at, cost int64) {
	last, ok := s.newestAt()
	if !ok || last < at {
		return
	}
	if c := s.newestCost(); c <= cost {
		s.sum -= c
		s.pop()
	} else {
		s.setLast(c - cost)
		s.sum -= cost
	}
}

// Refund implements Refunder: the model is linear, so subtracting the
// cost decayed from at to the state's time undoes the record.
func (s *Decay) Refund(p Params, at, cost int64) {
	back := float64(cost)
	if s.T0 > at {
		back *= math.Exp(-float64(s.T0-at) / float64(p.Window))
	}
	s.setS(max(0, s.S-back))
}

// Refund implements Refunder: it moves the arrival time back by cost·T,
// exactly. Evaluations take max(TAT, now), so a TAT moved into the past
// changes nothing.
func (s *GCRA) Refund(p Params, at, cost int64) {
	if s.TAT == 0 {
		return
	}
	dq, dr := MulDiv(cost, p.Window%p.Rate, p.Rate)
	q, r := s.TAT-cost*(p.Window/p.Rate)-dq, min(s.Frac, p.Rate-1)-dr
	if r < 0 {
		q, r = q-1, r+p.Rate
	}
	s.TAT, s.Frac = q, r
}
