package sim

import (
	"slices"
	"sort"
	"testing"

	"github.com/sluicehq/sluice/internal/algo"
)

var hundredPerMinute = algo.Params{Rate: 100, Window: 60 * sec, Bucket: 6 * sec}

// smallTrace is a trace of 100,000 requests from 500 sources over an hour,
// shaped around hundredPerMinute.
func smallTrace(t *testing.T, seed uint64) *Trace { return sizedTrace(t, seed, 100_000, 500) }

func sizedTrace(t *testing.T, seed uint64, requests int64, sources int) *Trace {
	t.Helper()
	tr, err := NewTrace(TraceOptions{Seed: seed, Requests: requests, Sources: sources, Duration: 3600 * sec,
		Rate: hundredPerMinute.Rate, Window: hundredPerMinute.Window})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTraceDeterministic(t *testing.T) {
	a, b, c := smallTrace(t, 1), smallTrace(t, 1), smallTrace(t, 2)
	same := 0
	for i := 0; i < a.Sources(); i += 7 {
		ra, rb, rc := a.Requests(nil, i), b.Requests(nil, i), c.Requests(nil, i)
		if !slices.Equal(ra, rb) {
			t.Fatalf("source %d differs between two traces of seed 1", i)
		}
		if slices.Equal(ra, rc) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("%d sources identical under seeds 1 and 2", same)
	}
}

func TestTraceShape(t *testing.T) {
	tr := smallTrace(t, 1)
	total := int64(0)
	for i := range tr.Sources() {
		at := tr.Requests(nil, i)
		if int64(len(at)) != tr.Size(i) {
			t.Fatalf("source %d: %d requests, Size says %d", i, len(at), tr.Size(i))
		}
		if !slices.IsSorted(at) || at[0] < 0 || at[len(at)-1] >= tr.o.Duration {
			t.Fatalf("source %d: instants unsorted or outside [0, duration)", i)
		}
		total += int64(len(at))
	}
	if total != tr.o.Requests {
		t.Errorf("total %d requests, want exactly %d", total, tr.o.Requests)
	}
	for c := range numClasses {
		if n := tr.first[c+1] - tr.first[c]; n <= 0 {
			t.Errorf("class %v has no source", c)
		}
	}
}

// peak returns the highest exact count of source i's requests in any
// window (each request counting itself).
func peak(tr *Trace, i int) int64 {
	var e exact
	best := int64(0)
	for _, now := range tr.Requests(nil, i) {
		best = max(best, e.count(now, tr.o.Window)+1)
		e.add(now)
	}
	return best
}

// TestSteadySourcesStraddleTheThreshold: every steady-under source stays
// at or under the threshold, every steady-over source goes above it, and
// both stay within the 80–125% band.
func TestSteadySourcesStraddleTheThreshold(t *testing.T) {
	tr := smallTrace(t, 1)
	rate := tr.o.Rate
	for i := range tr.Sources() {
		c := tr.Class(i)
		if c != SteadyUnder && c != SteadyOver {
			continue
		}
		p, f := peak(tr, i), tr.Factor(i)
		switch {
		case c == SteadyUnder && (p > rate || f < 0.8 || f >= 0.99):
			t.Errorf("source %d (%v, %.3f): peak %d over the threshold %d", i, c, f, p, rate)
		case c == SteadyOver && tr.Size(i) > 2*rate && (p <= rate || f < 1.01 || f >= 1.25 || p > rate*5/4+2):
			t.Errorf("source %d (%v, %.3f): peak %d, want in (%d, 1.25×]", i, c, f, p, rate)
		}
	}
}

// TestHeavyTail: background sizes are heavy-tailed: the largest 1% of the
// sources send a large share of the background's requests, and the
// largest source is far above the median.
func TestHeavyTail(t *testing.T) {
	tr := smallTrace(t, 1)
	sizes := slices.Clone(tr.sizes[tr.first[Background]:])
	sort.Slice(sizes, func(a, b int) bool { return sizes[a] > sizes[b] })
	total, top := int64(0), int64(0)
	for k, n := range sizes {
		total += n
		if k < len(sizes)/100 {
			top += n
		}
	}
	if share := float64(top) / float64(total); share < 0.10 {
		t.Errorf("top 1%% of background sources send %.1f%% of its requests, want ≥ 10%%", 100*share)
	}
	if median := sizes[len(sizes)/2]; sizes[0] < 50*median {
		t.Errorf("largest source %d, median %d: want a heavy tail (≥ 50×)", sizes[0], median)
	}
}

// TestBurstsReachTheThreshold: bursty sources concentrate their requests
// in bursts of 30–250% of the threshold (two bursts in neighbouring slots
// can share a window), far above their average rate; with about ten bursts
// each, every source has one over the threshold.
func TestBurstsReachTheThreshold(t *testing.T) {
	tr := smallTrace(t, 1)
	for i := tr.first[Bursty]; i < tr.first[Bursty+1]; i++ {
		p := peak(tr, i)
		mean := float64(tr.Size(i)) * float64(tr.o.Window) / float64(tr.o.Duration)
		if p <= tr.o.Rate || p > 5*tr.o.Rate || float64(p) < 4*mean {
			t.Errorf("bursty source %d: peak %d per window, mean %.0f; want a peak in (%d, 5×] and ≥ 4× the mean",
				i, p, mean, tr.o.Rate)
		}
	}
}

// TestCloudflareProfile: in the cloudflare profile most sources are far
// below the threshold: no background source averages more than a quarter
// of it over the duration (here the cap binds: the largest Pareto shares
// would be ten times more), none goes over the threshold, and the trace
// still has exactly the requested requests, with the few special sources
// of the profile.
func TestCloudflareProfile(t *testing.T) {
	tr, err := NewTrace(TraceOptions{Seed: 1, Requests: 1_000_000, Sources: 10_000, Duration: 3600 * sec,
		Rate: 100, Window: 60 * sec, Profile: Cloudflare})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Profile() != Cloudflare || tr.first[Background] != 100+20+20 {
		t.Fatalf("profile %q, %d special sources; want cloudflare, 140", tr.Profile(), tr.first[Background])
	}
	most, capped, total := int64(25*60), 0, int64(0)
	for i := range tr.Sources() {
		total += tr.Size(i)
		if tr.Class(i) != Background {
			continue
		}
		if tr.Size(i) > most {
			t.Fatalf("background source %d sends %d requests, more than the cap %d", i, tr.Size(i), most)
		}
		if tr.Size(i) == most {
			capped++
		}
		if p := peak(tr, i); p > tr.o.Rate {
			t.Errorf("background source %d (%d requests) reaches %d in a window, over the threshold", i, tr.Size(i), p)
		}
	}
	if total != 1_000_000 || capped == 0 {
		t.Errorf("%d requests (want 1000000), %d background sources at the cap (want some)", total, capped)
	}
}

func TestNewTraceErrors(t *testing.T) {
	ok := TraceOptions{Seed: 1, Requests: 10_000, Sources: 100, Duration: 3600 * sec, Rate: 100, Window: 60 * sec}
	cases := map[string]func(o *TraceOptions){
		"zero rate":        func(o *TraceOptions) { o.Rate = 0 },
		"short duration":   func(o *TraceOptions) { o.Duration = o.Window - 1 },
		"too few sources":  func(o *TraceOptions) { o.Sources = 3 },
		"too many sources": func(o *TraceOptions) { o.Sources = MaxSources + 1 },
		"too few requests": func(o *TraceOptions) { o.Requests = 50 },
		"unknown profile":  func(o *TraceOptions) { o.Profile = "calm" },
		// 97 background sources of at most a quarter of 100 per minute
		// for an hour (1500 each) cannot send the 180,000 or so requests
		// the three special sources leave.
		"too many for cloudflare": func(o *TraceOptions) { o.Profile, o.Requests = Cloudflare, 200_000 },
	}
	for name, mutate := range cases {
		o := ok
		mutate(&o)
		if _, err := NewTrace(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := NewTrace(ok); err != nil {
		t.Errorf("valid options: %v", err)
	}
}
