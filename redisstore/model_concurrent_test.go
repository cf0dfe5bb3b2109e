package redisstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/ident"
	"github.com/sluicehq/sluice/internal/redistest"
)

// recorder is a Scripter that keeps every decide.lua call that got a
// reply: its KEYS, ARGV and reply, as Redis saw them.
type recorder struct {
	Scripter
	decide script
	mu     sync.Mutex
	calls  []recordedCall
}

type recordedCall struct {
	keys, args []string
	reply      []int64
}

func (r *recorder) keep(sha string, keys, args []string, reply []int64, err error) ([]int64, error) {
	if err == nil && sha == r.decide.sha {
		r.mu.Lock()
		// A copy: the Store decodes the reply in place (a buckets
		// snapshot becomes the state it records).
		r.calls = append(r.calls, recordedCall{keys, args, slices.Clone(reply)})
		r.mu.Unlock()
	}
	return reply, err
}

func (r *recorder) EvalSha(ctx context.Context, sha string, keys, args []string) ([]int64, error) {
	reply, err := r.Scripter.EvalSha(ctx, sha, keys, args)
	return r.keep(sha, keys, args, reply, err)
}

func (r *recorder) Eval(ctx context.Context, src string, keys, args []string) ([]int64, error) {
	reply, err := r.Scripter.Eval(ctx, src, keys, args)
	return r.keep(newScriptSrc(src).sha, keys, args, reply, err)
}

// TestConcurrentSameAsModel: 16 goroutines send random single-slot checks
// at once, so that the Store coalesces them into batches, on the server's
// clock. Every decide.lua call is recorded as Redis answered it; the calls
// are then replayed into internal/algo in the order their replies report
// (the server's TIME, read at the start of each call: Redis runs one
// script at a time, so it rises strictly from call to call), check by
// check within a call. Every check's outcome, every hit's fit and the
// usage each hit's snapshot shows must be the model's. TestSameAsModel
// sends one check at a time; this is the batched, concurrent path.
func TestConcurrentSameAsModel(t *testing.T) {
	srv := redistest.Standalone(t)
	rec := &recorder{Scripter: NewScripter(srv.Client()), decide: loadScripts().decide}
	s, err := NewWithScripter(rec, Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	limits := []sluice.Limit{
		{Rate: 7, Window: 200 * time.Millisecond},
		{Rate: 20, Window: 300 * time.Millisecond, Algorithm: sluice.Buckets, Resolution: 30 * time.Millisecond},
		{Rate: 9, Window: 250 * time.Millisecond, Algorithm: sluice.Log},
		{Rate: 12, Window: 200 * time.Millisecond, Algorithm: sluice.Decay},
		{Rate: 5, Window: 100 * time.Millisecond, Algorithm: sluice.GCRA},
		{Rate: 3, Window: 100 * time.Millisecond, Shadow: true},
	}
	var wg sync.WaitGroup
	var sent atomic.Int64
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			var d sluice.Decision
			for range 300 {
				c := sluice.Check{Cost: int64(rng.IntN(4)), Group: "g"} // one slot, even in a Cluster
				for j := range 1 + rng.IntN(3) {
					c.Hits = append(c.Hits, sluice.Hit{Zone: fmt.Sprint("z", j), Key: fmt.Sprint("k", rng.IntN(3)), Limit: limits[rng.IntN(len(limits))]})
				}
				if c.Validate() != nil {
					continue
				}
				sent.Add(1)
				if err := s.Check(context.Background(), c, &d); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	calls := rec.calls
	slices.SortFunc(calls, func(a, b recordedCall) int { return int(a.reply[0] - b.reply[0]) })
	states := map[string]algo.State{}
	checks, batched, denied := 0, 0, 0
	for n, rc := range calls {
		if n > 0 && rc.reply[0] == calls[n-1].reply[0] {
			t.Fatalf("two calls report the same µs %d: their order is unknown", rc.reply[0])
		}
		k, d := replayCall(t, rc, states)
		checks += k
		denied += d
		if k > 1 {
			batched++
		}
	}
	t.Logf("%d calls, %d checks, %d calls of several checks, %d checks denied", len(calls), checks, batched, denied)
	if checks != int(sent.Load()) {
		t.Fatalf("%d checks sent, %d in the recorded calls", sent.Load(), checks)
	}
	if batched < 20 || denied < 100 || denied > checks-100 {
		t.Fatalf("%d batched calls, %d of %d checks denied: the load does not exercise batching and both outcomes", batched, denied, checks)
	}
}

// replayCall decides the checks of one recorded call with internal/algo
// on states, comparing each with the reply. It returns the number of
// checks and of denials.
func replayCall(t *testing.T, rc recordedCall, states map[string]algo.State) (checks, denied int) {
	t.Helper()
	num := func(i int) int64 {
		v, err := strconv.ParseInt(rc.args[i], 10, 64)
		if err != nil {
			t.Fatalf("ARGV[%d] = %q: %v", i+1, rc.args[i], err)
		}
		return v
	}
	var specs []spec
	for l := range int(num(3)) {
		a := 4 + 5*l
		specs = append(specs, spec{code: rc.args[a][0], rate: num(a + 1), window: num(a + 2), bucket: num(a + 3), shadow: rc.args[a+4] == "1"})
	}
	now := rc.reply[0]
	dec, err := newDecoder(rc.reply)
	if err != nil {
		t.Fatal(err)
	}
	for a, key := 4+5*len(specs), 0; a < len(rc.args); checks++ {
		cost, n := num(a), int(num(a+1))
		cl := &call{cost: cost}
		hits := make([]algo.Hit, n)
		for i := range n {
			sp := specs[num(a+2+i)-1]
			cl.specs = append(cl.specs, sp)
			st, ok := states[rc.keys[key+i]]
			if !ok {
				info, _ := ident.ByCode(sp.code)
				st = info.New()
				states[rc.keys[key+i]] = st
			}
			hits[i] = algo.Hit{State: st, Params: sp.params(), Shadow: sp.shadow}
		}
		got, err := dec.next(cl)
		if err != nil {
			t.Fatal(err)
		}
		before := make([]float64, n)
		for i, h := range hits {
			before[i] = h.State.Eval(h.Params, now, cost).Used
		}
		out := make([]algo.Outcome, n)
		allowed, _, _ := algo.Decide(hits, out, now, cost)
		if allowed != got.allowed {
			t.Fatalf("call at %d, check %d: Redis allowed %v, the model %v", now, checks, got.allowed, allowed)
		}
		for i, sp := range cl.specs {
			used := float64(got.hits[i].snap[0]) // log's snapshot starts with its sum
			if sp.code != 'l' {
				used = snapshotState(sp.code, got.hits[i].snap).Eval(sp.params(), now, cost).Used
			}
			if got.hits[i].fits != out[i].Allowed || math.Abs(used-before[i]) > 1e-9*max(1, used) {
				t.Fatalf("call at %d, check %d, hit %d (%c): Redis fits %v with %v used, the model %v with %v",
					now, checks, i, sp.code, got.hits[i].fits, used, out[i].Allowed, before[i])
			}
		}
		if !allowed {
			denied++
		}
		a += 2 + n
		key += n
	}
	if err := dec.done(); err != nil {
		t.Fatal(err)
	}
	return checks, denied
}
