package faulttest

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// timeout is the Guard's (and the store's) per-call timeout in these tests:
// the default, 50 ms.
const timeout = edge.DefaultTimeout

// slack is what the issue allows on top of the timeout for p99.
const slack = 5 * time.Millisecond

// newStore connects a Redis store to url. Its own timeout is long: the
// Guard's is the one under test, and a loaded machine may take longer than
// 50 ms to load the scripts at warm-up.
func newStore(t *testing.T, url string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Dial(url, redisstore.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("redisstore.Dial(%q): %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newStoreWithClient is newStore on a rueidis client made from opt, which
// the caller may close (the store does not); it is closed when the test
// ends.
func newStoreWithClient(t *testing.T, opt rueidis.ClientOption) (*redisstore.Store, rueidis.Client) {
	t.Helper()
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	s, err := redisstore.New(c, redisstore.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return s, c
}

// newGuard returns a Guard in front of store with the default 50 ms
// timeout, unless opts sets one: tests whose subject is not the timeout set
// a generous one, so a loaded machine cannot turn them into outages.
func newGuard(t *testing.T, store sluice.Limiter, opts edge.GuardOptions) *edge.Guard {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = timeout
	}
	opts.Logger = testLogger(t)
	g, err := edge.NewGuard(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// testLogger sends slog lines to t.Log, so a failing test shows what the
// breaker saw.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func hit(key, spec string, algo sluice.Algorithm) sluice.Hit {
	l, err := sluice.ParseLimit(spec)
	if err != nil {
		panic(err)
	}
	l.Algorithm = algo
	return sluice.Hit{Zone: "fault", Key: key, Limit: l}
}

// mustCheck runs one check, failing the test on an error: under a Guard,
// an outage is a degraded decision, never an error.
func mustCheck(t *testing.T, l sluice.Limiter, c sluice.Check) sluice.Decision {
	t.Helper()
	var d sluice.Decision
	if err := l.Check(context.Background(), c, &d); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return d
}

// waitStore checks c until the store answers (Source FromStore) and returns
// that decision; it fails the test after within.
func waitStore(t *testing.T, l sluice.Limiter, c sluice.Check, within time.Duration) sluice.Decision {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		d := mustCheck(t, l, c)
		if d.Source == sluice.FromStore {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not answer within %v; last source %v", within, d.Source)
		}
		time.Sleep(5 * time.Millisecond) // polling a real process
	}
}

// percentile returns the p-th percentile (0 < p <= 100) of ds, sorting it.
func percentile(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	i := int(float64(len(ds))*p/100+0.5) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

// pid returns the process id of a running redis-server, from INFO.
func pid(t *testing.T, s *redistest.Server) int {
	t.Helper()
	info, err := s.Do("INFO", "server").ToString()
	if err != nil {
		t.Fatalf("INFO server: %v", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("INFO process_id %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("INFO server has no process_id:\n%s", info)
	return 0
}

// hang stops the redis-server of process id p with SIGSTOP: its connections stay open and
// nothing answers, as with a server stuck in a long command, swapping, or
// behind a partition. The returned function resumes it; it also runs when
// the test ends.
func hang(t *testing.T, p int) (resume func()) {
	t.Helper()
	if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP redis-server %d: %v", p, err)
	}
	resumed := false
	resume = func() {
		if !resumed {
			resumed = true
			syscall.Kill(p, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	return resume
}

// waitGoroutines waits until no more than n goroutines run, and fails the
// test with their stacks if that does not happen within a few seconds.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// degradedSource is the Source of a decision taken by policy p.
func degradedSource(p edge.Policy) sluice.Source {
	switch p {
	case edge.PolicyClosed:
		return sluice.FromFailClosed
	case edge.PolicyLocal:
		return sluice.FromFallback
	}
	return sluice.FromFailOpen
}

func describe(ds []time.Duration) string {
	return fmt.Sprintf("p50 %v, p99 %v, max %v", percentile(ds, 50), percentile(ds, 99), percentile(ds, 100))
}
