package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
)

// TestSameAsModel drives the Redis store and the memory store (which runs
// internal/algo directly) with the same seeded random checks on the same
// fake clock, and requires the same decision, field by field: the Lua
// scripts and the Go model must not drift. Used, RetryAfter and ResetAfter
// must be equal; only decay, whose exp and log come from two different
// math libraries, may differ by a few ulps in Used and by 1 µs in waits.
func TestSameAsModel(t *testing.T) {
	srv := redistest.Standalone(t)
	now := time.Unix(1_700_000_040, 123_456_000)
	clock := func() time.Time { return now }
	rs := newStore(t, srv.Client(), redisstore.Options{Now: clock, MaxBatch: 1})
	ms, err := memstore.New(memstore.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	limits := []sluice.Limit{
		{Rate: 7, Window: 10 * time.Second},
		{Rate: 20, Window: 3 * time.Second, Algorithm: sluice.Buckets, Resolution: 300 * time.Millisecond},
		{Rate: 9, Window: 5 * time.Second, Algorithm: sluice.Log},
		{Rate: 12, Window: 4 * time.Second, Algorithm: sluice.Decay},
		{Rate: 5, Window: 2 * time.Second, Algorithm: sluice.GCRA},
		{Rate: 3, Window: time.Second, Shadow: true},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var dr, dm sluice.Decision
	denied, allowed := 0, 0
	for i := range 3000 {
		now = now.Add(time.Duration(rng.IntN(120_000)) * time.Microsecond)
		c := sluice.Check{Cost: int64(rng.IntN(4))}
		for j := range 1 + rng.IntN(3) {
			l := limits[rng.IntN(len(limits))]
			c.Hits = append(c.Hits, sluice.Hit{Zone: fmt.Sprint("z", j), Key: fmt.Sprint("k", rng.IntN(2)), Limit: l})
		}
		if c.Validate() != nil {
			continue
		}
		if rng.IntN(50) == 0 {
			mustReset(t, rs, c)
			mustReset(t, ms, c)
			continue
		}
		if err := rs.Check(context.Background(), c, &dr); err != nil {
			t.Fatal(err)
		}
		if err := ms.Check(context.Background(), c, &dm); err != nil {
			t.Fatal(err)
		}
		if why := differ(c, &dr, &dm); why != "" {
			t.Fatalf("check %d at %v: %s\nredis:  %+v\nmemory: %+v", i, now.Sub(time.Unix(1_700_000_040, 0)), why, dr, dm)
		}
		if dr.Allowed {
			allowed++
		} else {
			denied++
		}
	}
	t.Logf("%d allowed, %d denied", allowed, denied)
	if denied < 300 || allowed < 300 {
		t.Fatalf("%d allowed, %d denied: the traffic does not exercise both", allowed, denied)
	}
}

func mustReset(t *testing.T, l sluice.Limiter, c sluice.Check) {
	t.Helper()
	if err := l.Reset(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// differ says how two decisions of c differ, or "".
func differ(c sluice.Check, r, m *sluice.Decision) string {
	if r.Allowed != m.Allowed || denierOf(r) != denierOf(m) || r.Shadowed != m.Shadowed {
		return "decisions differ"
	}
	for i, h := range c.Hits {
		a, b := r.Hits[i], m.Hits[i]
		usedTol, waitTol := 0.0, time.Duration(0)
		if h.Limit.Algo() == sluice.Decay {
			usedTol, waitTol = 1e-12*max(1, b.Used), time.Microsecond
		}
		switch {
		case a.Allowed != b.Allowed || a.Shadow != b.Shadow || a.Remaining != b.Remaining:
			return fmt.Sprintf("hit %d (%s): results differ", i, h.Limit.Algo())
		case math.Abs(a.Used-b.Used) > usedTol:
			return fmt.Sprintf("hit %d (%s): Used %v vs %v", i, h.Limit.Algo(), a.Used, b.Used)
		case (a.RetryAfter-b.RetryAfter).Abs() > waitTol || (a.ResetAfter-b.ResetAfter).Abs() > waitTol:
			return fmt.Sprintf("hit %d (%s): waits %v/%v vs %v/%v", i, h.Limit.Algo(), a.RetryAfter, a.ResetAfter, b.RetryAfter, b.ResetAfter)
		}
	}
	return ""
}
