package workertest

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
	"github.com/sluicehq/sluice/redisstore"
)

// readyLine is what a worker prints when it is ready; it then waits for a
// line on its standard input before it starts.
const readyLine = "ready"

// timeout bounds a worker's whole life.
const timeout = 2 * time.Minute

// Main makes the process a worker when the environment variable env holds
// a job: it calls work with the job and a ready function (which work calls
// once set up; it returns when the test lets the workers go), prints the
// result as JSON and exits. Without env it returns at once. Call it first
// in TestMain.
func Main(env string, work func(job []byte, ready func() error) (result any, err error)) {
	job := os.Getenv(env)
	if job == "" {
		return
	}
	in := bufio.NewReader(os.Stdin)
	ready := func() error {
		fmt.Println(readyLine)
		if _, err := in.ReadString('\n'); err != nil {
			return fmt.Errorf("waiting for the start: %w", err)
		}
		return nil
	}
	r, err := work([]byte(job), ready)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		os.Exit(2)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// Dial returns a store of the Redis at url, connected and with its scripts
// loaded by a peek at a key next to hit's, so that a worker's first check
// costs what the others do.
func Dial(url string, opts redisstore.Options, hit sluice.Hit) (*redisstore.Store, error) {
	store, err := redisstore.Dial(url, opts)
	if err != nil {
		return nil, err
	}
	warm := hit
	warm.Key += "-warm"
	var d sluice.Decision
	if err := store.Check(context.Background(), sluice.Check{Hits: []sluice.Hit{warm}}, &d); err != nil {
		store.Close()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	return store, nil
}

// A Worker is a running worker process.
type Worker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// Start starts n workers of job (marshalled to JSON into env) and waits
// until all are ready. Each is killed when the test ends if it is still
// running, and none lives longer than two minutes.
func Start(t testing.TB, env string, job any, n int) []*Worker {
	t.Helper()
	spec, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	workers := make([]*Worker, n)
	for i := range workers {
		w := &Worker{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^$")}
		w.cmd.Env = append(os.Environ(), env+"="+string(spec))
		w.cmd.Stderr = os.Stderr // a worker's complaints go to the test's output
		if w.in, err = w.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		out, err := w.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		w.out = bufio.NewReader(out)
		if err := w.cmd.Start(); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		t.Cleanup(func() {
			if w.cmd.ProcessState == nil {
				w.cmd.Process.Kill()
				w.cmd.Wait()
			}
		})
		workers[i] = w
	}
	for i, w := range workers {
		line, err := w.out.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != readyLine {
			t.Fatalf("worker %d not ready: %q, %v", i, line, err)
		}
	}
	return workers
}

// Go lets the worker start.
func (w *Worker) Go() error {
	if _, err := io.WriteString(w.in, "go\n"); err != nil {
		return err
	}
	return w.in.Close()
}

// Result waits for the worker to finish and decodes its result into v.
func (w *Worker) Result(v any) error {
	err := json.NewDecoder(w.out).Decode(v)
	if werr := w.cmd.Wait(); werr != nil {
		return fmt.Errorf("worker: %w", werr)
	}
	if err != nil {
		return fmt.Errorf("worker result: %w", err)
	}
	return nil
}

// Job is the usual worker's job: Goroutines callers, each making Checks
// checks of Hit at cost 1, as fast as it can, on the Redis at URL.
type Job struct {
	URL        string
	Hit        sluice.Hit
	Goroutines int
	Checks     int
}

// Result is what Hammer reports.
type Result struct {
	Allowed, Denied int64
	Errors          []string
	Start, End      time.Time
}

// Hammer runs j's callers on l and returns what they got.
func Hammer(l sluice.Limiter, j Job) Result {
	var r Result
	var allowed, denied atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	c := sluice.Check{Hits: []sluice.Hit{j.Hit}, Cost: 1}
	r.Start = time.Now()
	for range j.Goroutines {
		wg.Go(func() {
			var d sluice.Decision
			for range j.Checks {
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

// Work is a worker function for Main that runs a Job (JSON) with a store
// of its own (Dial, with a generous 5 s timeout: a check that timed out
// may still have been counted) and returns its Result.
func Work(spec []byte, ready func() error) (any, error) {
	var j Job
	if err := json.Unmarshal(spec, &j); err != nil {
		return nil, err
	}
	store, err := Dial(j.URL, redisstore.Options{Timeout: 5 * time.Second}, j.Hit)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if err := ready(); err != nil {
		return nil, err
	}
	return Hammer(store, j), nil
}
