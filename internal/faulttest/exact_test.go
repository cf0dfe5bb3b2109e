package faulttest

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/workertest"
	"github.com/sluicehq/sluice/redisstore"
)

// workerEnv, when set, makes the test binary a worker of
// TestExactAcrossProcesses: it runs the job in the variable (JSON) and
// prints its result (JSON) instead of running tests.
const workerEnv = "SLUICE_FAULTTEST_WORKER"

// The shape of TestExactAcrossProcesses.
const (
	processes  = 4
	goroutines = 16
	attempts   = 50 // per goroutine: 3,200 checks in all
	rate       = 300
)

// job is what one worker process does.
type job struct {
	workertest.Job
	// Edge puts a Guard (policy closed) and a DenyCache in front of the
	// store, as the server does.
	Edge bool
}

// result is what one worker process reports.
type result struct {
	workertest.Result
	CacheHits uint64 // denials from the deny cache, with Edge
}

func TestMain(m *testing.M) {
	workertest.Main(workerEnv, work)
	os.Exit(m.Run())
}

// work runs a worker's job once the test lets it go (internal/workertest).
func work(spec []byte, ready func() error) (any, error) {
	var j job
	if err := json.Unmarshal(spec, &j); err != nil {
		return nil, err
	}
	// A generous timeout: this test is about exactness under contention,
	// not latency, and a check that timed out may still have been counted.
	store, err := workertest.Dial(j.URL, redisstore.Options{Timeout: 5 * time.Second}, j.Hit)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	var l sluice.Limiter = store
	var cache *edge.DenyCache
	if j.Edge {
		if cache, err = edgeStack(store); err != nil {
			return nil, err
		}
		l = cache
	}
	if err := ready(); err != nil {
		return nil, err
	}
	r := result{Result: workertest.Hammer(l, j.Job)}
	if cache != nil {
		r.CacheHits = cache.Stats().Hits
	}
	return r, nil
}

// edgeStack puts a DenyCache and a Guard in front of store. The Guard's
// timeout is as generous as the store's: a check that timed out may still
// have been counted by Redis, and this test counts admissions exactly.
func edgeStack(store sluice.Limiter) (*edge.DenyCache, error) {
	g, err := edge.NewGuard(store, edge.GuardOptions{Policy: edge.PolicyClosed, Timeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	return edge.NewDenyCache(g, edge.DenyCacheOptions{})
}

// runWorkers starts the worker processes on j, waits until all are ready,
// lets them go together and returns their results.
func runWorkers(t *testing.T, j job) []result {
	t.Helper()
	workers := workertest.Start(t, workerEnv, j, processes)
	for _, w := range workers {
		if err := w.Go(); err != nil {
			t.Fatal(err)
		}
	}
	results := make([]result, processes)
	for i, w := range workers {
		if err := w.Result(&results[i]); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	return results
}

// TestExactAcrossProcesses starts 4 OS processes with 16 goroutines each,
// all checking one key as fast as they can, and counts what they admitted
// together. log admits exactly Rate in a window (the whole test fits in
// one). gcra admits its burst of Rate, plus one per emission interval
// (Window/Rate) of the test's duration. On standalone, the workers also
// run with the edge layer (Guard and DenyCache) in front of the store: the
// cache's denials must not change the count.
func TestExactAcrossProcesses(t *testing.T) {
	targets := []struct {
		name  string
		url   func(t *testing.T) string
		edges []bool
	}{
		{"standalone", func(t *testing.T) string { return redistest.Standalone(t).URL() }, []bool{false, true}},
		{"cluster", func(t *testing.T) string { return redistest.NewCluster(t).URL() }, []bool{false}},
	}
	for _, target := range targets {
		t.Run(target.name, func(t *testing.T) {
			url := target.url(t)
			for _, algo := range []sluice.Algorithm{sluice.Log, sluice.GCRA} {
				for _, withEdge := range target.edges {
					name := string(algo)
					if withEdge {
						name += "+edge"
					}
					t.Run(name, func(t *testing.T) { exactRun(t, url, algo, withEdge) })
				}
			}
		})
	}
}

// exactRun runs the workers on one fresh key and checks their total.
func exactRun(t *testing.T, url string, algo sluice.Algorithm, withEdge bool) {
	t.Helper()
	l := sluice.Limit{Rate: rate, Window: time.Hour, Algorithm: algo}
	j := job{
		Job: workertest.Job{
			URL:        url,
			Hit:        sluice.Hit{Zone: "exact", Key: t.Name(), Limit: l},
			Goroutines: goroutines,
			Checks:     attempts,
		},
		Edge: withEdge,
	}
	results := runWorkers(t, j)
	assertExact(t, l, results)
	if withEdge {
		var hits uint64
		for _, r := range results {
			hits += r.CacheHits
		}
		t.Logf("%d denials from the workers' deny caches", hits)
		if hits == 0 {
			t.Errorf("no denial came from a deny cache: the edge layer was not exercised")
		}
	}
}

func assertExact(t *testing.T, l sluice.Limit, results []result) {
	t.Helper()
	var allowed, denied int64
	start, end := results[0].Start, results[0].End
	for i, r := range results {
		if len(r.Errors) > 0 {
			t.Errorf("worker %d: %d errors, first: %s", i, len(r.Errors), r.Errors[0])
		}
		allowed += r.Allowed
		denied += r.Denied
		start, end = minTime(start, r.Start), maxTime(end, r.End)
	}
	span := end.Sub(start)
	lastStart, firstEnd := results[0].Start, results[0].End
	for _, r := range results {
		lastStart, firstEnd = maxTime(lastStart, r.Start), minTime(firstEnd, r.End)
	}
	if !lastStart.Before(firstEnd) {
		t.Errorf("the workers did not run at the same time: the last started %v after the first ended",
			lastStart.Sub(firstEnd))
	}
	// log: exactly Rate. gcra: Rate, plus one per emission interval that
	// passed during the test (none here: the interval is 12 s).
	lo, hi := l.Rate, l.Rate
	if l.Algorithm == sluice.GCRA {
		hi += int64(span/(l.Window/time.Duration(l.Rate))) + 1
	}
	t.Logf("%d processes × %d goroutines × %d checks over %v: %d allowed, %d denied (limit %d)",
		processes, goroutines, attempts, span.Round(time.Millisecond), allowed, denied, l.Rate)
	if total := allowed + denied; total != processes*goroutines*attempts {
		t.Errorf("%d decisions, want %d", total, processes*goroutines*attempts)
	}
	if allowed < lo || allowed > hi {
		t.Errorf("%d admitted in total, want %d..%d", allowed, lo, hi)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
