package edge

import (
	"sync/atomic"
	"time"
)

// throttle lets one event through per interval and counts the rest, so a
// store outage that degrades thousands of decisions a second writes one log
// line per interval that says how many it stands for. It is lock-free: the
// caller that wins the compare-and-swap on next logs, the others only count.
type throttle struct {
	every      time.Duration
	now        func() time.Time
	next       atomic.Int64 // UnixNano before which events are suppressed
	suppressed atomic.Int64
}

// allow reports whether the event may be logged now and, if so, how many
// events were suppressed since the last one that was.
func (t *throttle) allow() (ok bool, suppressed int64) {
	now := t.now().UnixNano()
	next := t.next.Load()
	if now < next || !t.next.CompareAndSwap(next, now+int64(t.every)) {
		t.suppressed.Add(1)
		return false, 0
	}
	return true, t.suppressed.Swap(0)
}
