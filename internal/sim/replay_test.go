package sim

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/algo"
)

const sec = int64(1_000_000)

// fixed is a hand-built workload: fixed[i] are source i's instants.
type fixed [][]int64

func (f fixed) Sources() int { return len(f) }

func (f fixed) Requests(buf []int64, i int) []int64 { return append(buf, f[i]...) }

func seconds(s ...float64) []int64 {
	out := make([]int64, len(s))
	for k, v := range s {
		out[k] = int64(v * float64(sec))
	}
	return out
}

// twoPerTen is the limit of the hand-computed cases: 2 per 10 s, windows
// aligned on multiples of 10 s.
var twoPerTen = algo.Params{Rate: 2, Window: 10 * sec, Bucket: 10 * sec}

// handBuilt has one source per kind of error of the sliding window, each
// worked out by hand in TestHandBuiltSlidingWindow.
var handBuilt = fixed{
	seconds(9.9, 9.95, 15),    // let through: real 3 at 15 s, estimate 2·5/10 + 1 = 2
	seconds(9, 9.5, 12, 19.5), // denied at 19.5 s: real 2, estimate 2·0.5/10 + 1 + 1 = 2.1
	seconds(0.5, 1, 10.5, 11), // falsely limited: real never above 2, estimates 2.9, 3.8
}

func TestHandBuiltSlidingWindow(t *testing.T) {
	rep, err := Run(context.Background(), handBuilt, twoPerTen, Options{Algorithms: []string{"sliding-window", "log"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 11 || rep.Sources != 3 {
		t.Fatalf("requests %d, sources %d; want 11, 3", rep.Requests, rep.Sources)
	}
	// Per request |estimate − real| / real, where not zero:
	// source 0 at 15 s: |2 − 3|/3; source 1 at 12 s: |2.6 − 3|/3, at 19.5 s:
	// |2.1 − 2|/2; source 2 at 10.5 s: |2.9 − 2|/2, at 11 s: |3.8 − 2|/2.
	diff := (1.0/3 + 0.4/3 + 0.1/2 + 0.9/2 + 1.8/2) / 11
	want := Result{Algorithm: "sliding-window", Limited: 4, ExactLimited: 2, WronglyAllowed: 1, WronglyDenied: 3,
		SourcesLimited: 2, SourcesOver: 2, FalselyLimited: 1, FalselyLetThrough: 1, WorstMiss: 0.5,
		Model: "exact window", ModelWronglyDecided: 4}
	got := rep.Results[0]
	if got.MeanRateDiff == nil || math.Abs(*got.MeanRateDiff-diff) > 1e-9 || math.Abs(got.ModelMeanDiff-diff) > 1e-9 {
		t.Errorf("MeanRateDiff = %v, ModelMeanDiff = %v, want both %v", got.MeanRateDiff, got.ModelMeanDiff, diff)
	}
	if got.MeanRateDiff, got.ModelMeanDiff = nil, 0; got != want {
		t.Errorf("sliding-window:\n got %+v\nwant %+v", got, want)
	}
	exact := Result{Algorithm: "log", Limited: 2, ExactLimited: 2, SourcesLimited: 2, SourcesOver: 2, Model: "exact window"}
	if got := rep.Results[1]; got.MeanRateDiff == nil || *got.MeanRateDiff != 0 {
		t.Errorf("log: MeanRateDiff %v, want 0", got.MeanRateDiff)
	} else if got.MeanRateDiff = nil; got != exact {
		t.Errorf("log:\n got %+v\nwant %+v", got, exact)
	}
}

// TestEnforceGCRA: in enforcing mode each algorithm is compared with the
// exact count of what it admitted. GCRA at 2 per 10 s (one every 5 s, a
// burst of 2) admits 0 s and 1 s, denies 2 s and 3 s, and admits 6 s,
// although 0 s and 1 s are still in the window: one wrong admission.
func TestEnforceGCRA(t *testing.T) {
	rep, err := Run(context.Background(), fixed{seconds(0, 1, 2, 3, 6)}, twoPerTen,
		Options{Algorithms: []string{"gcra", "log"}, Enforce: true})
	if err != nil {
		t.Fatal(err)
	}
	// Its worst window, (0 s, 6 s] in any window of 10 s, holds 3: 1.5 L.
	// Against its own exact model it makes no error.
	want := Result{Algorithm: "gcra", Limited: 2, ExactLimited: 3, WronglyAllowed: 1,
		SourcesLimited: 1, SourcesOver: 1, Model: "GCRA (TAT)"}
	got := rep.Results[0]
	if got.MeanRateDiff != nil || got.WorstWindow == nil || *got.WorstWindow != (WorstWindow{Sources: 1, Mean: 1.5, Max: 1.5}) {
		t.Errorf("gcra: MeanRateDiff %v (want none), WorstWindow %+v (want 1 source, 1.5, 1.5)", got.MeanRateDiff, got.WorstWindow)
	}
	if got.ModelMeanDiff > 1e-12 {
		t.Errorf("gcra: ModelMeanDiff %v, want 0", got.ModelMeanDiff)
	}
	if got.WorstWindow, got.ModelMeanDiff = nil, 0; got != want {
		t.Errorf("gcra:\n got %+v\nwant %+v", got, want)
	}
	// The log admits 0 s and 1 s, denies 2 s and 3 s, and denies 6 s too.
	exact := Result{Algorithm: "log", Limited: 3, ExactLimited: 3, SourcesLimited: 1, SourcesOver: 1, Model: "exact window"}
	if got := rep.Results[1]; got.WorstWindow == nil || *got.WorstWindow != (WorstWindow{Sources: 1, Mean: 1, Max: 1}) {
		t.Errorf("log: WorstWindow %+v, want 1 source, 1, 1", got.WorstWindow)
	} else if got.WorstWindow, got.MeanRateDiff = nil, nil; got != exact {
		t.Errorf("log:\n got %+v\nwant %+v", got, exact)
	}
	if rep.Mode != "enforce" {
		t.Errorf("mode %q, want enforce", rep.Mode)
	}
}

// TestLogIsExact: the log algorithm is the reference's own model, so on a
// generated trace, in either mode, it must show no error at all.
func TestLogIsExact(t *testing.T) {
	tr := sizedTrace(t, 3, 40_000, 200)
	for _, enforce := range []bool{false, true} {
		rep, err := Run(context.Background(), tr, hundredPerMinute, Options{Algorithms: []string{"log"}, Enforce: enforce})
		if err != nil {
			t.Fatal(err)
		}
		r := rep.Results[0]
		if r.WronglyAllowed != 0 || r.WronglyDenied != 0 || *r.MeanRateDiff != 0 || r.FalselyLimited != 0 || r.FalselyLetThrough != 0 ||
			r.ModelWronglyDecided != 0 || r.ModelMeanDiff != 0 {
			t.Errorf("enforce=%v: log differs from the exact reference: %+v", enforce, r)
		}
		if r.Limited == 0 || r.SourcesOver == 0 || r.Limited != r.ExactLimited {
			t.Errorf("enforce=%v: the trace does not exercise the limit: %+v", enforce, r)
		}
	}
}

// TestRunIndependentOfWorkers: the report is the same whatever the number
// of workers, to the last bit of the mean.
func TestRunIndependentOfWorkers(t *testing.T) {
	tr := sizedTrace(t, 5, 40_000, 200)
	var first *Report
	for _, workers := range []int{1, 3} {
		rep, err := Run(context.Background(), tr, hundredPerMinute, Options{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = rep
			continue
		}
		if !reflect.DeepEqual(rep, first) {
			t.Errorf("workers=%d:\n got %+v\nwant %+v", workers, rep.Results, first.Results)
		}
	}
	if first.Requests != tr.o.Requests {
		t.Errorf("replayed %d requests, the trace has %d", first.Requests, tr.o.Requests)
	}
}

func TestRunErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		w    Workload
		p    algo.Params
		o    Options
	}{
		{"unknown algorithm", handBuilt, twoPerTen, Options{Algorithms: []string{"fixed-window"}}},
		{"zero rate", handBuilt, algo.Params{Window: sec, Bucket: sec}, Options{}},
		{"bucket not dividing", handBuilt, algo.Params{Rate: 1, Window: 10 * sec, Bucket: 3 * sec}, Options{}},
		{"watch out of range", handBuilt, twoPerTen, Options{Watch: []int{3}}},
		{"unsorted", fixed{seconds(2, 1)}, twoPerTen, Options{}},
	}
	for _, c := range cases {
		if _, err := Run(ctx, c.w, c.p, c.o); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Run(canceled, handBuilt, twoPerTen, Options{}); err != context.Canceled {
		t.Errorf("canceled: got %v, want context.Canceled", err)
	}
}

// TestWatch: a watched source's points hold every request with the real
// count including it, and samples that end at zero once the source is
// forgotten.
func TestWatch(t *testing.T) {
	for _, enforce := range []bool{false, true} {
		rep, err := Run(context.Background(), handBuilt, twoPerTen,
			Options{Algorithms: []string{"sliding-window", "log"}, Watch: []int{0}, Enforce: enforce})
		if err != nil {
			t.Fatal(err)
		}
		s := rep.Series[0]
		var reals []int64
		for _, pt := range s.Points {
			if pt.At == handBuilt[0][len(reals)%3] && len(reals) < 3 {
				reals = append(reals, pt.Real)
				if pt.Estimate[1] != float64(pt.Real) {
					t.Errorf("log estimate %v at %d µs, real %d", pt.Estimate[1], pt.At, pt.Real)
				}
			}
		}
		if want := []int64{1, 2, 3}; !reflect.DeepEqual(reals, want) {
			t.Errorf("enforce=%v: real counts at the requests %v, want %v (shadow: all counted)", enforce, reals, want)
		}
		last := s.Points[len(s.Points)-1]
		if last.Real != 0 || last.Estimate[0] != 0 || last.At < 15*sec+2*twoPerTen.Window-twoPerTen.Window/60 {
			t.Errorf("last point %+v: want everything forgotten two windows after the last request", last)
		}
	}
}

// TestClassesAddUp: a Trace's results broken down by class add up to the
// totals.
func TestClassesAddUp(t *testing.T) {
	tr := sizedTrace(t, 2, 40_000, 200)
	rep, err := Run(context.Background(), tr, hundredPerMinute, Options{Algorithms: []string{"sliding-window", "decay"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Classes) != int(numClasses) {
		t.Fatalf("%d classes, want %d", len(rep.Classes), numClasses)
	}
	for k, total := range rep.Results {
		var sum Result
		sources, requests := 0, int64(0)
		for _, c := range rep.Classes {
			r := c.Results[k]
			sum.Limited += r.Limited
			sum.WronglyAllowed += r.WronglyAllowed
			sum.WronglyDenied += r.WronglyDenied
			sum.FalselyLimited += r.FalselyLimited
			sum.FalselyLetThrough += r.FalselyLetThrough
			sources, requests = sources+c.Sources, requests+c.Requests
		}
		if sum.Limited != total.Limited || sum.WronglyAllowed != total.WronglyAllowed || sum.WronglyDenied != total.WronglyDenied ||
			sum.FalselyLimited != total.FalselyLimited || sum.FalselyLetThrough != total.FalselyLetThrough {
			t.Errorf("%s: classes add up to %+v, total %+v", total.Algorithm, sum, total)
		}
		if sources != rep.Sources || requests != rep.Requests {
			t.Errorf("classes hold %d sources and %d requests, want %d and %d", sources, requests, rep.Sources, rep.Requests)
		}
	}
	if c := rep.Classes[SteadyUnder]; c.Class != "steady-under" || c.Results[0].ExactLimited != 0 {
		t.Errorf("steady-under class: %+v, want no request over the limit", c)
	}
}

// BenchmarkRun replays a 100,000-request trace through the five
// algorithms; ns/request is the cost of one request through all of them.
func BenchmarkRun(b *testing.B) {
	tr, err := NewTrace(TraceOptions{Seed: 1, Requests: 100_000, Sources: 1000, Duration: 3600 * sec,
		Rate: hundredPerMinute.Rate, Window: hundredPerMinute.Window})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Run(context.Background(), tr, hundredPerMinute, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100_000, "ns/request")
}
