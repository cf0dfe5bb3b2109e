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
	run := func(n, share int) AsyncReport {
		t.Helper()
		r, err := RunAsync(context.Background(), tr, p, AsyncOptions{Processes: n, Share: share, Interval: sec / 10, Latency: sec / 1000})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("N=%d processes, share %d: worst window over %d sources: mean %.3f, max %.3f (x Rate)", n, share, r.Sources, r.Mean, r.Max)
		return r
	}
	if one := run(1, 1); one.Max > 1 || one.Sources == 0 {
		t.Errorf("one process: %+v, want a worst window of at most 1", one)
	}
	unshared, shared := run(4, 1), run(4, 4)
	if shared.Max > unshared.Max || shared.Mean > unshared.Mean+1e-9 || unshared.Max > 5 {
		t.Errorf("4 processes: share 4 %+v, share 1 %+v: want the share to help, and the unshared fleet within 1+N", shared, unshared)
	}
}
