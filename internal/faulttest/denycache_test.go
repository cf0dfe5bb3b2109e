package faulttest

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// clock is a fake clock shared by the stores of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestDenyCacheOnRedis is package edge's deny-cache property on the Lua
// scripts: the cache relies on the store's RetryAfter, which Redis computes.
// Two Redis stores on one server (different prefixes, one fake clock) see
// the same traffic, one behind a DenyCache; other processes' checks reach
// both around it. Every decision through the cache must equal the other
// store's, also when retried a microsecond around the end of a denial.
func TestDenyCacheOnRedis(t *testing.T) {
	srv := redistest.Standalone(t)
	for _, algo := range sluice.Algorithms() {
		t.Run(string(algo), func(t *testing.T) {
			clk := &clock{t: time.Now().Truncate(time.Second)}
			store := func(prefix string) *redisstore.Store {
				s, err := redisstore.Dial(srv.URL(), redisstore.Options{Prefix: prefix + string(algo) + ":", Now: clk.Now, Timeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			behind, oracle := store("behind:"), store("oracle:")
			dc, err := edge.NewDenyCache(behind, edge.DenyCacheOptions{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			a := hit("a", "5r/10s", algo)
			checks := []sluice.Check{
				{Hits: []sluice.Hit{a}, Cost: 1},
				{Hits: []sluice.Hit{a}, Cost: 2},
				{Hits: []sluice.Hit{a, hit("a", "20r/m", algo)}, Cost: 1},
			}
			r := rand.New(rand.NewPCG(7, uint64(len(algo))))
			var lastWait time.Duration
			var last sluice.Check
			for step := range 3000 {
				c := checks[r.IntN(len(checks))]
				if lastWait > 0 && r.IntN(3) == 0 {
					const us = time.Microsecond
					c = last
					clk.Advance(lastWait + time.Duration(r.IntN(3)-1)*us)
				} else {
					clk.Advance(time.Duration(r.Int64N(300_000)) * time.Microsecond)
				}
				lastWait = 0
				if r.IntN(5) == 0 { // another process's check
					if x, y := mustCheck(t, behind, c), mustCheck(t, oracle, c); x.Allowed != y.Allowed {
						t.Fatalf("step %d: the two stores disagree", step)
					}
					continue
				}
				got, want := mustCheck(t, dc, c), mustCheck(t, oracle, c)
				if got.Allowed != want.Allowed {
					t.Fatalf("step %d: %+v: cache says allowed %v (source %v), store says %v",
						step, c, got.Allowed, got.Source, want.Allowed)
				}
				if !want.Allowed {
					last, lastWait = c, want.RetryAfter()
				}
			}
			s := dc.Stats()
			t.Logf("%d denials from the cache", s.Hits)
			if s.Hits < 100 {
				t.Errorf("only %d denials from the cache: the property was barely exercised", s.Hits)
			}
		})
	}
}
