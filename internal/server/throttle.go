package server

import (
	"sync/atomic"
	"time"
)

// throttle lets one event through per interval and counts the rest, so an
// upstream that is down while thousands of requests a second reach the
// proxy writes one log line per interval that says how many it stands for,
// as edge.Guard does for degraded decisions. It is lock-free: the caller
// that wins the compare-and-swap on next logs, the others only count.
type throttle struct {
	every      time.Duration
	now        func() time.Time // nil: time.Now
	next       atomic.Int64     // UnixNano before which events are suppressed
	suppressed atomic.Int64
}

// allow reports whether the event may be logged now and, if so, how many
// events were suppressed since the last one that was.
func (t *throttle) allow() (ok bool, suppressed int64) {
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	at, next := now().UnixNano(), t.next.Load()
	if at < next || !t.next.CompareAndSwap(next, at+int64(t.every)) {
		t.suppressed.Add(1)
		return false, 0
	}
	return true, t.suppressed.Swap(0)
}
