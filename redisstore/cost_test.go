package redisstore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
)

// The tests of this file measure the Redis CPU time the scripts cost per
// check (INFO cpu before and after, divided by the checks), calling the
// scripts directly: no coalescer, one call at a time. They are a tool for
// changing the scripts, not a guard; they run only with SLUICE_COST=1:
//
//	SLUICE_COST=1 go test -run 'Cost' -v ./redisstore

// serverCPU returns the server's CPU time so far in seconds.
func serverCPU(t *testing.T, srv *redistest.Server) float64 {
	text, _ := srv.Do("INFO", "cpu").ToString()
	total := 0.0
	for _, line := range strings.Split(text, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return total
}

// TestScriptCost: decide.lua per check, for three algorithms, in calls of
// 1 and of 16 checks on distinct keys under their limits (the allow path).
func TestScriptCost(t *testing.T) {
	if os.Getenv("SLUICE_COST") == "" {
		t.Skip("a measurement: set SLUICE_COST=1")
	}
	srv := redistest.Standalone(t)
	s, _ := New(srv.Client(), Options{})
	ctx := context.Background()
	for _, a := range []sluice.Algorithm{sluice.SlidingWindow, sluice.GCRA, sluice.Log} {
		for _, batch := range []int{1, 16} {
			l := sluice.Limit{Rate: 1_000_000, Window: time.Hour, Algorithm: a}
			calls := make([]call, batch)
			ptrs := make([]*call, batch)
			for i := range calls {
				c := sluice.Check{Cost: 1, Hits: []sluice.Hit{{Key: fmt.Sprint("key", i), Limit: l}}}
				calls[i] = s.plan(c, true)[0]
				ptrs[i] = &calls[i]
			}
			const rounds = 3000
			s.decideCalls(ctx, ptrs)
			c0 := serverCPU(t, srv)
			start := time.Now()
			for range rounds {
				if _, _, err := s.decideCalls(ctx, ptrs); err != nil {
					t.Fatal(err)
				}
			}
			c1 := serverCPU(t, srv)
			t.Logf("%s batch %d: %.2f µs Redis CPU per check (wall %v)", a, batch, (c1-c0)*1e6/float64(rounds*batch), time.Since(start)/time.Duration(rounds*batch))
		}
	}
}

// TestScriptCostFloor compares decide.lua with scripts that receive the
// same KEYS and ARGV and do nothing, only build a reply of the same size,
// or only GET each key: the part of the cost that no script can avoid.
func TestScriptCostFloor(t *testing.T) {
	if os.Getenv("SLUICE_COST") == "" {
		t.Skip("a measurement: set SLUICE_COST=1")
	}
	srv := redistest.Standalone(t)
	s, _ := New(srv.Client(), Options{})
	ctx := context.Background()
	l := sluice.Limit{Rate: 1_000_000, Window: time.Hour}
	for _, batch := range []int{16, 64} {
		calls := make([]*call, batch)
		for i := range calls {
			c := sluice.Check{Cost: 1, Hits: []sluice.Hit{{Key: fmt.Sprint("key", i), Limit: l}}}
			cl := s.plan(c, true)[0]
			calls[i] = &cl
		}
		keys, args := encode("", "0", "x.1", calls)
		for name, src := range map[string]string{
			"empty":     "return {1}",
			"replyonly": "local r = {} for i = 1, #KEYS * 5 + 1 do r[i] = i end return r",
			"getonly":   "local r = {} for i = 1, #KEYS do r[i] = redis.call('GET', KEYS[i]) and 1 or 0 end return r",
			"decide":    s.scripts.decide.src,
		} {
			sc := script{src: src, sha: sha(src)}
			run(ctx, s.sc, sc, keys, args)
			const rounds = 2000
			c0 := serverCPU(t, srv)
			for range rounds {
				if _, err := run(ctx, s.sc, sc, keys, args); err != nil {
					t.Fatal(err)
				}
			}
			c1 := serverCPU(t, srv)
			t.Logf("%s batch %d: %.2f µs per check", name, batch, (c1-c0)*1e6/float64(rounds*batch))
		}
	}
}

func sha(src string) string { return newScriptSrc(src).sha }
