package storetest

import (
	"sync"
	"time"
)

// StartUnix is the instant a Clock starts at, in seconds since the epoch:
// far from the epoch like a real clock reading (2023-11-15T00:00:00Z), and
// aligned to a whole day, so that every window of a second, a minute, an
// hour or a day (and any divisor of those) starts there.
const StartUnix = 1_700_006_400

// Start returns the instant a Clock starts at (StartUnix).
func Start() time.Time { return time.Unix(StartUnix, 0).UTC() }

// Clock is a fake clock for tests. Its zero value reads Start(). It is safe
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
	return Start().Add(c.off)
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
	c.off = t.Sub(Start())
}

// Since returns how far the clock is past Start().
func (c *Clock) Since() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off
}
