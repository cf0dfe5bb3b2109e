package redisstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/ident"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestSameAsModel drives a Store with default options (coalescing on,
// the production path) and a Go model of it with the same seeded random
// checks: costs 0–3, one to four hits with and without a Group, shadow
// limits, resets, and a clock that steps back in one check of ten. The
// model is internal/algo run the way the Store runs the scripts: one
// all-or-nothing decision per hash slot (one slot outside a Cluster), and
// in a Cluster the slots that recorded refunded (algo.Refunder) when
// another slot denied. Every field of every decision must be equal; only
// decay, whose exp and log come from two different math libraries, may
// differ by a few ulps in Used and 1 µs in waits.
func TestSameAsModel(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { sameAsModel(t, redistest.Standalone(t).Client()) })
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a six-node Cluster")
		}
		sameAsModel(t, redistest.NewCluster(t).Client())
	})
}

func sameAsModel(t *testing.T, client rueidis.Client) {
	now := time.Unix(1_700_000_040, 123_456_000)
	s, err := New(client, Options{Now: func() time.Time { return now }, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := &model{s: s, states: map[string]algo.State{}}
	limits := []sluice.Limit{
		{Rate: 7, Window: 10 * time.Second},
		{Rate: 20, Window: 3 * time.Second, Algorithm: sluice.Buckets, Resolution: 300 * time.Millisecond},
		{Rate: 9, Window: 5 * time.Second, Algorithm: sluice.Log},
		{Rate: 12, Window: 4 * time.Second, Algorithm: sluice.Decay},
		{Rate: 5, Window: 2 * time.Second, Algorithm: sluice.GCRA},
		{Rate: 7, Window: time.Second, Algorithm: sluice.GCRA},
		{Rate: 3, Window: time.Second, Shadow: true},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var got sluice.Decision
	denied, allowed, refunds := 0, 0, 0
	for i := range 4000 {
		step := time.Duration(rng.IntN(120_000)) * time.Microsecond
		if rng.IntN(10) == 0 {
			step = -step * 5 // the clock steps back
		}
		now = now.Add(step)
		c := sluice.Check{Cost: int64(rng.IntN(4))}
		if rng.IntN(3) == 0 {
			c.Group = fmt.Sprint("g", rng.IntN(2))
		}
		for j := range 1 + rng.IntN(4) {
			l := limits[rng.IntN(len(limits))]
			c.Hits = append(c.Hits, sluice.Hit{Zone: fmt.Sprint("z", j), Key: fmt.Sprint("k", rng.IntN(3)), Limit: l})
		}
		if c.Validate() != nil {
			continue
		}
		if rng.IntN(50) == 0 {
			if err := s.Reset(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			m.reset(c)
			continue
		}
		if err := s.Check(context.Background(), c, &got); err != nil {
			t.Fatal(err)
		}
		want, refunded := m.check(c, now.UnixMicro())
		if refunded {
			refunds++
		}
		if why := differ(c, &got, &want); why != "" {
			t.Fatalf("check %d at %v: %s\nredis: %+v\nmodel: %+v", i, now.Sub(time.Unix(1_700_000_040, 0)), why, got, want)
		}
		if got.Allowed {
			allowed++
		} else {
			denied++
		}
	}
	t.Logf("%d allowed, %d denied, %d refunded", allowed, denied, refunds)
	if denied < 300 || allowed < 300 {
		t.Fatalf("%d allowed, %d denied: the traffic does not exercise both", allowed, denied)
	}
	if s.cluster && refunds < 50 {
		t.Fatalf("only %d checks refunded: the traffic does not exercise cross-slot refunds", refunds)
	}
}

// model is the Go model of a Store: states by their Redis key.
type model struct {
	s      *Store
	states map[string]algo.State
}

func (m *model) state(key string, l sluice.Limit) algo.State {
	st, ok := m.states[key]
	if !ok {
		a, _ := ident.Lookup(string(l.Algo()))
		st = a.New()
		m.states[key] = st
	}
	return st
}

func (m *model) reset(c sluice.Check) {
	for _, h := range c.Hits {
		key, _ := stateKey(m.s.prefix, stateOf(h, c.Group))
		delete(m.states, key)
	}
}

// check decides c as the Store does: per slot, all or nothing, then
// refunds. It reports whether a refund was made.
func (m *model) check(c sluice.Check, now int64) (d sluice.Decision, refunded bool) {
	calls := m.s.plan(c, true)
	d.Prepare(len(c.Hits))
	evals := make([]algo.Result, len(c.Hits))
	recordedIn := []int{}
	allowed := true
	for k, cl := range calls {
		fits := true
		for j, i := range cl.hits {
			st := m.state(cl.keys[j], c.Hits[i].Limit)
			evals[i] = st.Eval(cl.specs[j].params(), now, c.Cost)
			fits = fits && (evals[i].Allowed || cl.specs[j].shadow)
		}
		allowed = allowed && fits
		if fits && c.Cost > 0 {
			recordedIn = append(recordedIn, k)
		}
	}
	recordedAt := map[string]int64{}
	for _, k := range recordedIn {
		cl := calls[k]
		for j, i := range cl.hits {
			r := &evals[i]
			recordedAt[cl.keys[j]] = algo.RecordedAt(m.states[cl.keys[j]], cl.specs[j].params(), now)
			used, reset := m.states[cl.keys[j]].Record(cl.specs[j].params(), now, c.Cost)
			if allowed {
				r.Used, r.ResetAfter = used, reset
			}
		}
	}
	if !allowed {
		for _, k := range recordedIn {
			cl := calls[k]
			for j := range cl.hits {
				m.states[cl.keys[j]].(algo.Refunder).Refund(cl.specs[j].params(), recordedAt[cl.keys[j]], c.Cost)
			}
			refunded = true
		}
	}
	for _, cl := range calls {
		for j, i := range cl.hits {
			r := evals[i]
			if r.Allowed {
				r.RetryAfter = 0
			}
			d.Hits[i] = sluice.HitResult{
				Allowed: r.Allowed, Shadow: cl.specs[j].shadow, Used: r.Used,
				Remaining:  algo.Remaining(cl.specs[j].rate, r.Used),
				RetryAfter: time.Duration(r.RetryAfter) * time.Microsecond,
				ResetAfter: time.Duration(r.ResetAfter) * time.Microsecond,
			}
		}
	}
	d.Conclude(sluice.FromStore)
	return d, refunded
}

// differ says how two decisions of c differ, or "".
func differ(c sluice.Check, r, m *sluice.Decision) string {
	ri, rok := r.Denier()
	mi, mok := m.Denier()
	if r.Allowed != m.Allowed || ri != mi || rok != mok || r.Shadowed != m.Shadowed {
		return "decisions differ"
	}
	for i, h := range c.Hits {
		a, b := r.Hits[i], m.Hits[i]
		usedTol, waitTol := 0.0, time.Duration(0)
		if h.Limit.Algo() == sluice.Decay {
			usedTol, waitTol = 1e-9*max(1, b.Used), time.Microsecond
		}
		switch {
		case a.Allowed != b.Allowed || a.Shadow != b.Shadow || (a.Remaining != b.Remaining && usedTol == 0):
			return fmt.Sprintf("hit %d (%s): results differ", i, h.Limit.Algo())
		case math.Abs(a.Used-b.Used) > usedTol:
			return fmt.Sprintf("hit %d (%s): Used %v vs %v", i, h.Limit.Algo(), a.Used, b.Used)
		case (a.RetryAfter-b.RetryAfter).Abs() > waitTol || (a.ResetAfter-b.ResetAfter).Abs() > waitTol:
			return fmt.Sprintf("hit %d (%s): waits %v/%v vs %v/%v", i, h.Limit.Algo(), a.RetryAfter, a.ResetAfter, b.RetryAfter, b.ResetAfter)
		}
	}
	return ""
}
