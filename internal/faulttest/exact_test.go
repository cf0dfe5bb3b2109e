package faulttest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
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
	URL        string
	Hit        sluice.Hit
	Goroutines int
	Attempts   int
	// Edge puts a Guard (policy closed) and a DenyCache in front of the
	// store, as the server does.
	Edge bool
}

// result is what one worker process reports.
type result struct {
	Allowed, Denied int64
	CacheHits       uint64 // denials from the deny cache, with Edge
	Errors          []string
	Start, End      time.Time
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(workerEnv); spec != "" {
		os.Exit(work(spec))
	}
	os.Exit(m.Run())
}

// work runs a worker's job and prints its result; it returns the exit code.
func work(spec string) int {
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fmt.Fprintf(os.Stderr, "worker: bad job %q: %v\n", spec, err)
		return 2
	}
	// A generous timeout: this test is about exactness under contention,
	// not latency, and a check that timed out may still have been counted.
	store, err := redisstore.Dial(j.URL, redisstore.Options{Timeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		return 2
	}
	defer store.Close()
	// Connect and load the scripts before the start, with a peek on
	// another key.
	warm := j.Hit
	warm.Key += "-warm"
	var d sluice.Decision
	if err := store.Check(context.Background(), sluice.Check{Hits: []sluice.Hit{warm}}, &d); err != nil {
		fmt.Fprintf(os.Stderr, "worker: warm-up: %v\n", err)
		return 2
	}
	var l sluice.Limiter = store
	var cache *edge.DenyCache
	if j.Edge {
		if cache, err = edgeStack(store); err != nil {
			fmt.Fprintf(os.Stderr, "worker: %v\n", err)
			return 2
		}
		l = cache
	}
	// Start together: say ready, wait for the go.
	fmt.Println(ready)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintf(os.Stderr, "worker: waiting for the start: %v\n", err)
		return 2
	}
	r := hammer(l, j)
	if cache != nil {
		r.CacheHits = cache.Stats().Hits
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 2
	}
	return 0
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

// hammer runs the job's goroutines, each checking the hit Attempts times
// as fast as it can.
func hammer(l sluice.Limiter, j job) result {
	var r result
	var allowed, denied atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	c := sluice.Check{Hits: []sluice.Hit{j.Hit}, Cost: 1}
	r.Start = time.Now()
	for range j.Goroutines {
		wg.Go(func() {
			var d sluice.Decision
			for range j.Attempts {
				if err := l.Check(context.Background(), c, &d); err != nil {
					mu.Lock()
					r.Errors = append(r.Errors, err.Error())
					mu.Unlock()
					continue
				}
				if d.Allowed {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r.End = time.Now()
	r.Allowed, r.Denied = allowed.Load(), denied.Load()
	return r
}

// ready is the line a worker prints when it is connected and warmed up;
// it then waits for a line on its standard input before it starts.
const ready = "ready"

// A workerProc is one running worker process.
type workerProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr strings.Builder
}

func startWorker(ctx context.Context, spec []byte) (*workerProc, error) {
	w := &workerProc{cmd: exec.CommandContext(ctx, os.Args[0])}
	w.cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
	w.cmd.Stderr = &w.stderr
	var err error
	if w.in, err = w.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w.out = bufio.NewReader(out)
	return w, w.cmd.Start()
}

// waitReady reads the worker's ready line.
func (w *workerProc) waitReady() error {
	line, err := w.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != ready {
		return fmt.Errorf("not ready: %q, %v\n%s", line, err, w.stderr.String())
	}
	return nil
}

// result tells the worker to go and reads its result.
func (w *workerProc) result() (result, error) {
	var r result
	if _, err := io.WriteString(w.in, "go\n"); err != nil {
		return r, err
	}
	w.in.Close()
	err := json.NewDecoder(w.out).Decode(&r)
	if werr := w.cmd.Wait(); werr != nil {
		return r, fmt.Errorf("%v\n%s", werr, w.stderr.String())
	}
	return r, err
}

// runWorkers starts the worker processes on j, waits until all are ready,
// lets them go together and returns their results.
func runWorkers(t *testing.T, j job) []result {
	t.Helper()
	spec, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var workers []*workerProc
	defer func() { // on an early failure: no worker outlives the test
		for _, w := range workers {
			if w.cmd.ProcessState == nil {
				w.cmd.Process.Kill()
				w.cmd.Wait()
			}
		}
	}()
	for i := range processes {
		w, err := startWorker(ctx, spec)
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		workers = append(workers, w)
	}
	for i, w := range workers {
		if err := w.waitReady(); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	results := make([]result, processes)
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() {
			r, err := w.result()
			if err != nil {
				t.Errorf("worker %d: %v", i, err)
			}
			results[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
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
		URL:        url,
		Hit:        sluice.Hit{Zone: "exact", Key: t.Name(), Limit: l},
		Goroutines: goroutines,
		Attempts:   attempts,
		Edge:       withEdge,
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
