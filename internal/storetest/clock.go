package storetest

import (
	"sync"
	"time"
)

// Start is the instant a Clock starts at: far from the epoch like a real
// clock reading, and aligned to a whole day, so that every window of a
// second, a minute, an hour or a day (and any divisor of those) starts at
// Start.
var Start = time.Unix(1_700_006_400, 0).UTC()

// Clock is a fake clock for tests. Its zero value reads Start. It is safe
// for concurrent use.
type Clock struct {
	mu  sync.Mutex
	off time.Duration // since Start
}

// Now returns the clock's reading. Pass the method value c.Now as a
// store's Now function.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Start.Add(c.off)
}

// Advance moves the clock by d (backward when d < 0).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = t.Sub(Start)
}

// Since returns how far the clock is past Start.
func (c *Clock) Since() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off
}
