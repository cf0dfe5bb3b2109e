package openresty

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
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
)

// goWorkerEnv, when set, makes the test binary a Go process of the mixed
// fleet (TestMixedFleet): it runs the job in the variable (JSON) with its
// own redisstore.Store and prints the result (JSON) instead of running
// tests.
const goWorkerEnv = "SLUICE_OPENRESTY_GO_WORKER"

// goReady is what a Go worker prints once connected, before it waits for
// the start line on its standard input.
const goReady = "ready"

// goJob is what one Go process does: Goroutines callers, each making
// Checks checks of Hit at cost 1 on the Redis at URL.
type goJob struct {
	URL        string
	Hit        sluice.Hit
	Goroutines int
	Checks     int
}

// goResult is what one Go process reports.
type goResult struct {
	Allowed, Denied int
	Errors          []string
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(goWorkerEnv); spec != "" {
		os.Exit(goWork(spec))
	}
	os.Exit(m.Run())
}

// goWork runs a Go worker's job and prints its result; it returns the exit
// code.
func goWork(spec string) int {
	var j goJob
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fmt.Fprintf(os.Stderr, "go worker: bad job: %v\n", err)
		return 2
	}
	store, err := redisstore.Dial(j.URL, redisstore.Options{Timeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintf(os.Stderr, "go worker: %v\n", err)
		return 2
	}
	defer store.Close()
	// Connect and load the scripts before the start, with a peek on
	// another key.
	warm := j.Hit
	warm.Key += "-warm"
	var d sluice.Decision
	if err := store.Check(context.Background(), sluice.Check{Hits: []sluice.Hit{warm}}, &d); err != nil {
		fmt.Fprintf(os.Stderr, "go worker: warm-up: %v\n", err)
		return 2
	}
	fmt.Println(goReady)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintf(os.Stderr, "go worker: waiting for the start: %v\n", err)
		return 2
	}
	var (
		mu  sync.Mutex
		r   goResult
		wg  sync.WaitGroup
		c   = sluice.Check{Hits: []sluice.Hit{j.Hit}, Cost: 1}
		ctx = context.Background()
	)
	for range j.Goroutines {
		wg.Go(func() {
			for range j.Checks {
				var d sluice.Decision
				err := store.Check(ctx, c, &d)
				mu.Lock()
				switch {
				case err != nil:
					r.Errors = append(r.Errors, err.Error())
				case d.Allowed:
					r.Allowed++
				default:
					r.Denied++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 2
	}
	return 0
}

// goProcess is a Go worker started by startGoProcess.
type goProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startGoProcess starts this test binary as a Go worker of j and waits
// (up to a minute) until it is connected. It is killed when the test ends.
func startGoProcess(t *testing.T, j goJob) *goProcess {
	t.Helper()
	spec, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), goWorkerEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p := &goProcess{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line, err := p.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != goReady {
		t.Fatalf("go worker: %q, %v; want %q", line, err, goReady)
	}
	return p
}

// start lets the worker go.
func (p *goProcess) start() error {
	_, err := io.WriteString(p.stdin, "go\n")
	return err
}

// result waits for the worker's result.
func (p *goProcess) result() (goResult, error) {
	var r goResult
	if err := json.NewDecoder(p.out).Decode(&r); err != nil {
		return r, fmt.Errorf("go worker result: %w", err)
	}
	if err := p.cmd.Wait(); err != nil {
		return r, fmt.Errorf("go worker: %w", err)
	}
	return r, nil
}
