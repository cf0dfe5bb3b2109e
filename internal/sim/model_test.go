package sim

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/algo"
)

// TestWorstWindow holds the two-pointer pass to a brute force: the most
// instants whose span is under the window, for every subset start.
func TestWorstWindow(t *testing.T) {
	brute := func(at []int64, w int64) int64 {
		best := int64(0)
		for i := range at {
			n := int64(0)
			for j := i; j < len(at) && at[j]-at[i] < w; j++ {
				n++
			}
			best = max(best, n)
		}
		return best
	}
	cases := [][]int64{nil, {5}, {0, 9, 10, 19, 20}, {0, 0, 0, 10, 10}, {1, 2, 3, 4, 11, 12, 13}}
	r := newRNG(7, 0)
	for range 200 {
		at := make([]int64, 1+r.next()%40)
		for k := range at {
			at[k] = int64(r.next() % 60)
		}
		slices.Sort(at)
		cases = append(cases, at)
	}
	for _, at := range cases {
		if got, want := worstWindow(at, 10), brute(at, 10); got != want {
			t.Errorf("worstWindow(%v, 10) = %d, want %d", at, got, want)
		}
	}
}

// TestGCRAShadowNotAdvancedByDenials: in shadow mode a GCRA records only
// what it allows. At 2 per 10 s, 0 s and 1 s fill its burst (TAT 10 s);
// 2 s and 3 s are denied; at 5.5 s the TAT is still 10 s, so the request
// fits. Had the denials advanced the TAT (to 20 s), 5.5 s would be denied.
func TestGCRAShadowNotAdvancedByDenials(t *testing.T) {
	rep, err := Run(context.Background(), fixed{seconds(0, 1, 2, 3, 5.5)}, twoPerTen, Options{Algorithms: []string{"gcra"}})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Limited != 2 || r.ModelWronglyDecided != 0 || r.ModelMeanDiff > 1e-12 {
		t.Errorf("gcra limited %d requests (want 2), %d differ from its model (want 0), model diff %v", r.Limited, r.ModelWronglyDecided, r.ModelMeanDiff)
	}
	// Against the exact count of what it recorded (0, 1 and 5.5 s): 5.5 s
	// makes 3 in 10 s, wrongly allowed.
	if r.WronglyAllowed != 1 || r.WronglyDenied != 0 {
		t.Errorf("gcra against the window: %d wrongly allowed, %d wrongly denied; want 1, 0", r.WronglyAllowed, r.WronglyDenied)
	}
}

// TestModelsKeptOnATrace: on a generated trace, in both modes, gcra
// follows its exact integer model at every request, and decay its exact
// AR1 count but for the hundredth of a unit it forgets when a key goes
// idle (algo.DecayZero).
func TestModelsKeptOnATrace(t *testing.T) {
	tr := sizedTrace(t, 4, 40_000, 200)
	for _, enforce := range []bool{false, true} {
		rep, err := Run(context.Background(), tr, hundredPerMinute, Options{Algorithms: []string{"gcra", "decay"}, Enforce: enforce})
		if err != nil {
			t.Fatal(err)
		}
		g, d := rep.Results[0], rep.Results[1]
		if g.Model != "GCRA (TAT)" || g.ModelWronglyDecided != 0 || g.ModelMeanDiff > 1e-12 {
			t.Errorf("enforce=%v: gcra against its model: %+v", enforce, g)
		}
		if d.Model != "AR1 count" || float64(d.ModelWronglyDecided) > 1e-4*float64(rep.Requests) || d.ModelMeanDiff > 1e-3 {
			t.Errorf("enforce=%v: decay against its model: %d of %d requests differ, mean diff %v", enforce, d.ModelWronglyDecided, rep.Requests, d.ModelMeanDiff)
		}
		if g.MeanRateDiff != nil || d.MeanRateDiff == nil {
			t.Errorf("enforce=%v: a mean rate diff for gcra (%v) or none for decay", enforce, g.MeanRateDiff)
		}
	}
}

// TestWorstWindowOnATrace: enforcing, the log admits exactly the limit in
// its worst window; the others admit more, and under twice the limit
// (their bounds: the previous window, the oldest bucket, the burst
// allowance, each at most one limit; for decay, what it admits in a window
// is S(end) − S(start) + ∫S dt / W with S ≤ L, plus the hundredths it
// forgets when a key goes idle).
func TestWorstWindowOnATrace(t *testing.T) {
	tr := sizedTrace(t, 4, 40_000, 200)
	rep, err := Run(context.Background(), tr, hundredPerMinute, Options{Enforce: true})
	if err != nil {
		t.Fatal(err)
	}
	bound := map[string]float64{"sliding-window": 2, "buckets": 2, "gcra": 2, "decay": 2.01}
	for _, r := range rep.Results {
		w := r.WorstWindow
		if w == nil || w.Sources == 0 {
			t.Fatalf("%s: no worst window: %+v", r.Algorithm, w)
		}
		if r.Algorithm == "log" {
			if w.Mean != 1 || w.Max != 1 {
				t.Errorf("log: worst window %+v, want exactly 1 L", w)
			}
			continue
		}
		if w.Mean < 1 || w.Max <= 1 || w.Max > bound[r.Algorithm] || w.Mean > w.Max {
			t.Errorf("%s: worst window %+v, want a mean ≥ 1 and a max in (1, %v]", r.Algorithm, w, bound[r.Algorithm])
		}
	}
	shadow, err := Run(context.Background(), tr, hundredPerMinute, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if shadow.Results[0].WorstWindow != nil {
		t.Errorf("shadow mode reports a worst window: %+v", shadow.Results[0].WorstWindow)
	}
}

// flood is one source offering a request every 10 ms from start until
// 25 s: far over any limit here, from idle.
func flood(start float64) fixed {
	var at []float64
	for t := start; t < 25; t += 0.01 {
		at = append(at, t)
	}
	return fixed{seconds(at...)}
}

// TestFloodFromIdle shows how the window estimates reach their worst
// window. At 10 per 10 s, a flood that starts 5 s into a window (and into
// a 1 s bucket: 0.5 s) has its first 10 requests admitted at once. A
// window later, sliding-window discounts them linearly from the window's
// start, and buckets from their bucket's start, although they are all
// still inside the window: each unit freed is taken by the flood, until
// they leave the window 5 s later. That is nearly half a limit more (the
// part of the window, or bucket, before the flood): 14 requests in
// (5 s, 15 s]. The log admits exactly 10; gcra its burst of 10 plus one
// every second, 19.
func TestFloodFromIdle(t *testing.T) {
	p := algo.Params{Rate: 10, Window: 10 * sec, Bucket: sec}
	for _, c := range []struct {
		start float64
		algo  string
		want  int64
	}{
		{5, "sliding-window", 14}, {5.5, "buckets", 14}, {5, "log", 10}, {5, "gcra", 19},
	} {
		rep, err := Run(context.Background(), flood(c.start), p, Options{Algorithms: []string{c.algo}, Enforce: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.Results[0].WorstWindow; got.Sources != 1 || got.Max != float64(c.want)/10 {
			t.Errorf("%s, flood from %v s: worst window %+v, want %d requests (%v L)", c.algo, c.start, got, c.want, float64(c.want)/10)
		}
	}
}
