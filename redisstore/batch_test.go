package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// hammer runs callers goroutines, each making perCaller checks of c, and
// returns how many were allowed.
func hammer(t *testing.T, s *redisstore.Store, c sluice.Check, callers, perCaller int) int64 {
	t.Helper()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			var d sluice.Decision
			for range perCaller {
				if err := s.Check(context.Background(), c, &d); err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return allowed.Load()
}

// TestCoalescedExact: 64 goroutines on one key through coalesced batch
// calls admit exactly Rate for the exact algorithms, for a single key and
// for a shared group, on standalone and Cluster; and the calls were really
// batched (fewer script calls than checks).
func TestCoalescedExact(t *testing.T) {
	at := time.Unix(1_700_000_040, 0)
	targets := []struct {
		name  string
		short bool
		start func(t *testing.T) rueidis.Client
	}{
		{"standalone", true, func(t *testing.T) rueidis.Client { return redistest.Standalone(t).Client() }},
		{"cluster", false, func(t *testing.T) rueidis.Client { return redistest.NewCluster(t).Client() }},
	}
	for _, target := range targets {
		t.Run(target.name, func(t *testing.T) {
			if testing.Short() && !target.short {
				t.Skip("starts a six-node Cluster")
			}
			base := target.start(t)
			for _, a := range []sluice.Algorithm{sluice.Log, sluice.GCRA, sluice.SlidingWindow} {
				counter := &countingScripter{Scripter: redisstore.NewScripter(base)}
				s := scripterStore(t, counter, redisstore.Options{Now: fixedClock(at), Prefix: "coalesce-" + string(a) + ":"})
				l := sluice.Limit{Rate: 500, Window: time.Minute, Algorithm: a}
				if got := hammer(t, s, hit("z", "hot", l), 64, 20); got != l.Rate {
					t.Errorf("%s: %d admitted of 1280 checks, want exactly %d", a, got, l.Rate)
				}
				if calls := counter.calls.Load(); calls >= 64*20 {
					t.Errorf("%s: %d script calls for %d checks: nothing was coalesced", a, calls, 64*20)
				} else {
					t.Logf("%s: %d checks in %d script calls", a, 64*20, calls)
				}
			}
		})
	}
}

// TestCoalescedDown: with Redis down, every coalesced caller gets
// ErrUnavailable within about the timeout.
func TestCoalescedDown(t *testing.T) {
	srv := redistest.Standalone(t)
	s := newStore(t, srv.Client(), redisstore.Options{Timeout: 100 * time.Millisecond})
	spend(t, s, "k", tenPerMinute, 1, false)
	srv.Kill()
	var wg sync.WaitGroup
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			var d sluice.Decision
			if err := s.Check(context.Background(), hit("", "k", tenPerMinute), &d); !errors.Is(err, sluice.ErrUnavailable) {
				t.Errorf("Check with Redis down = %v, want ErrUnavailable", err)
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("32 checks with Redis down took %v", took)
	}
}

// TestCloseWaitsForQueuedChecks: checks racing with Close are either
// decided or fail with ErrUnavailable; after Close every check fails with
// ErrUnavailable; Close twice is fine.
func TestCloseWaitsForQueuedChecks(t *testing.T) {
	srv := redistest.Standalone(t)
	s, err := redisstore.Dial(srv.URL(), redisstore.Options{Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	var decided atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			var d sluice.Decision
			for range 20 {
				err := s.Check(context.Background(), hit("", "k", sluice.Limit{Rate: 1000, Window: time.Minute}), &d)
				switch {
				case err == nil:
					decided.Add(1)
				case !errors.Is(err, sluice.ErrUnavailable):
					t.Errorf("Check during Close = %v, want nil or ErrUnavailable", err)
				}
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for decided.Load() < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d checks decided after 30 s", decided.Load())
		}
		time.Sleep(time.Millisecond)
	}
	s.Close()
	wg.Wait()
	var d sluice.Decision
	if err := s.Check(context.Background(), hit("", "k", tenPerMinute), &d); !errors.Is(err, sluice.ErrUnavailable) {
		t.Fatalf("Check after Close = %v, want ErrUnavailable", err)
	}
	s.Close()
	// Every decided check was recorded: the count in Redis matches.
	got := mustCheck(t, newStore(t, srv.Client(), redisstore.Options{}), sluice.Check{Hits: hit("", "k", sluice.Limit{Rate: 1000, Window: time.Minute}).Hits}).Hits[0].Used
	if int64(got) < decided.Load() {
		t.Fatalf("Redis counts %v, but %d checks were decided", got, decided.Load())
	}
}

// TestBatchIsolatesFailures: a check on a key of the wrong type (a foreign
// key under the prefix) fails alone, with sluice.ErrBadState and not
// ErrUnavailable; the checks coalesced with it are decided.
func TestBatchIsolatesFailures(t *testing.T) {
	srv := redistest.Standalone(t)
	s := newStore(t, srv.Client(), redisstore.Options{Prefix: "iso:"})
	l := sluice.Limit{Rate: 1000, Window: time.Minute}
	if err := srv.Do("LPUSH", "iso:{bad}:W60000000", "x").Error(); err != nil {
		t.Fatal(err)
	}
	var good, bad atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			key := "good"
			if i%8 == 0 {
				key = "bad"
			}
			var d sluice.Decision
			for range 10 {
				err := s.Check(context.Background(), hit("", key, l), &d)
				switch {
				case key == "bad" && errors.Is(err, sluice.ErrBadState) && !errors.Is(err, sluice.ErrUnavailable):
					bad.Add(1)
				case key == "good" && err == nil && d.Allowed:
					good.Add(1)
				default:
					t.Errorf("key %s: err %v, allowed %v", key, err, d.Allowed)
				}
			}
		})
	}
	wg.Wait()
	if good.Load() != 560 || bad.Load() != 80 {
		t.Fatalf("good %d (want 560), bad %d (want 80)", good.Load(), bad.Load())
	}
}
