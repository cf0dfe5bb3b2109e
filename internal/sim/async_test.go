package sim

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/algo"
)

// TestRunAsync replays the harsh trace through async fleets (100r/m,
// sync interval 100 ms, 1 ms flush latency) and logs their worst windows
// beside the exact limit's 1.00. A single process can never exceed the
// limit (it only counts its own cost against a view that only shrinks
// between answers); a fleet told its size admits less than one that is
// not, or no more.
func TestRunAsync(t *testing.T) {
	p := algo.Params{Rate: 100, Window: 60 * sec}
	tr, err := NewTrace(TraceOptions{Seed: 1, Requests: 100_000, Sources: 1_000, Duration: 3600 * sec, Rate: p.Rate, Window: p.Window})
	if err != nil {
		t.Fatal(err)
	}
	run := func(n, share int, first int64) AsyncReport {
		t.Helper()
		r, err := RunAsync(context.Background(), tr, p, AsyncOptions{Processes: n, Share: share, Interval: sec / 10, Latency: sec / 1000, FirstSight: first})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("N=%d processes, share %d, first sight %d: worst window over %d sources: mean %.3f, max %.3f (x Rate); %d false denials (%.4f%% of %d requests)",
			n, share, first, r.Sources, r.Mean, r.Max, r.FalseDenials, 100*float64(r.FalseDenials)/float64(r.Requests), r.Requests)
		return r
	}
	if one := run(1, 1, 0); one.Max > 1 || one.Sources == 0 {
		t.Errorf("one process: %+v, want a worst window of at most 1", one)
	}
	unshared, shared := run(4, 1, 0), run(4, 4, 0)
	if shared.Max > unshared.Max || shared.Mean > unshared.Mean+1e-9 || unshared.Max > 5 {
		t.Errorf("4 processes: share 4 %+v, share 1 %+v: want the share to help, and the unshared fleet within 1+N", shared, unshared)
	}
}

// TestRunAsyncFalseDenials: the fleet denies a request only while the
// store's own denial stands, so what it wrongly denies against the exact
// window of what it admitted stays a small share, as for the synchronous
// algorithms; first sight (1 per process and source) adds at most N·1 to
// a source's worst window.
func TestRunAsyncFalseDenials(t *testing.T) {
	p := algo.Params{Rate: 100, Window: 60 * sec}
	tr, err := NewTrace(TraceOptions{Seed: 2, Requests: 100_000, Sources: 1_000, Duration: 3600 * sec, Rate: p.Rate, Window: p.Window})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []AsyncOptions{{Processes: 1, Share: 1}, {Processes: 4, Share: 4}, {Processes: 4, Share: 4, FirstSight: 1}} {
		o.Interval, o.Latency = sec/10, sec/1000
		r, err := RunAsync(context.Background(), tr, p, o)
		if err != nil {
			t.Fatal(err)
		}
		share := float64(r.FalseDenials) / float64(r.Requests)
		t.Logf("%+v: worst window mean %.3f, max %.3f; false denials %d (%.4f%%)", o, r.Mean, r.Max, r.FalseDenials, 100*share)
		if share > 0.001 {
			t.Errorf("%+v: %.4f%% of requests falsely denied, want at most 0.1%%", o, 100*share)
		}
		if bound := 1 + float64(o.Processes)*(float64((p.Rate+int64(o.Share)-1)/int64(o.Share))+float64(o.FirstSight))/float64(p.Rate); r.Max > bound {
			t.Errorf("%+v: worst window %.3f, want at most the bound %.3f", o, r.Max, bound)
		}
	}
}
