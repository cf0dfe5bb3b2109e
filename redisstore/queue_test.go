package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// gate is a Scripter in front of a real Redis whose calls wait at the gate
// until it opens: a Redis too slow for the load, without timing.
type gate struct {
	redisstore.Scripter
	entered chan struct{} // one value per call that reached the gate
	open    chan struct{}
	fail    bool // calls fail once the gate opens, as if the reply was lost
}

func (g *gate) EvalSha(ctx context.Context, sha1 string, keys, args []string) ([]int64, error) {
	g.entered <- struct{}{}
	<-g.open
	if g.fail {
		return nil, errors.New("gate: connection lost")
	}
	return g.Scripter.EvalSha(ctx, sha1, keys, args)
}

// TestQueueIsBounded: with both coalesced calls held up, MaxQueue checks
// wait and every check past them fails at once with ErrUnavailable; the
// waiting ones are decided when Redis answers again. Before the bound, the
// queue grew with every caller whose context allowed it.
func TestQueueIsBounded(t *testing.T) {
	srv := redistest.Standalone(t)
	g := &gate{Scripter: redisstore.NewScripter(srv.Client()), entered: make(chan struct{}, 100), open: make(chan struct{})}
	const maxQueue, extra = 8, 5
	s := scripterStore(t, g, redisstore.Options{MaxBatch: 2, MaxQueue: maxQueue, Timeout: time.Minute})
	l := sluice.Limit{Rate: 1000, Window: time.Minute}
	var wg sync.WaitGroup
	results := make(chan error, 2+maxQueue+extra)
	check := func() {
		var d sluice.Decision
		err := s.Check(context.Background(), hit("", "k", l), &d)
		if err == nil && !d.Allowed {
			err = errors.New("denied")
		}
		results <- err
	}
	// One check at a time until both calls are held at the gate.
	for range 2 {
		wg.Go(check)
		<-g.entered
	}
	for range maxQueue + extra {
		wg.Go(check)
	}
	for range extra {
		if err := <-results; !errors.Is(err, sluice.ErrUnavailable) {
			t.Fatalf("a check past the full queue: %v, want ErrUnavailable at once", err)
		}
	}
	close(g.open)
	wg.Wait()
	close(results)
	decided := 0
	for err := range results {
		if err != nil {
			t.Errorf("a check within the bound: %v", err)
		}
		decided++
	}
	if want := 2 + maxQueue; decided != want {
		t.Errorf("%d checks decided, want %d", decided, want)
	}
	if used := mustCheck(t, s, sluice.Check{Hits: hit("", "k", l).Hits}).Hits[0].Used; used != float64(2+maxQueue) {
		t.Errorf("Redis counts %v, want %d", used, 2+maxQueue)
	}
}

func TestMaxQueueOption(t *testing.T) {
	srv := redistest.Standalone(t)
	if _, err := redisstore.New(srv.Client(), redisstore.Options{MaxQueue: -1}); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("MaxQueue -1: %v, want ErrInvalid", err)
	}
}

// TestCloseReportsUndecidedChecks: Close waits for the checks queued at
// that moment; when their call fails, Close says so (it returned nil
// whatever happened), and a second Close says the same.
func TestCloseReportsUndecidedChecks(t *testing.T) {
	srv := redistest.Standalone(t)
	g := &gate{Scripter: redisstore.NewScripter(srv.Client()), entered: make(chan struct{}, 10), open: make(chan struct{}), fail: true}
	s, err := redisstore.NewWithScripter(g, redisstore.Options{MaxBatch: 2, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l := sluice.Limit{Rate: 10, Window: time.Minute}
	checked := make(chan error, 1)
	go func() {
		var d sluice.Decision
		checked <- s.Check(context.Background(), hit("", "k", l), &d)
	}()
	<-g.entered
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Close has begun once a new check is refused. Until then a probe
	// queues (or is held at the gate too) and gives up after a
	// millisecond.
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		var d sluice.Decision
		err := s.Check(ctx, hit("", "k2", l), &d)
		cancel()
		if err != nil && strings.Contains(err.Error(), "closed") {
			break
		}
	}
	close(g.open)
	if err := <-checked; !errors.Is(err, sluice.ErrUnavailable) {
		t.Errorf("the queued check: %v, want ErrUnavailable", err)
	}
	err = <-closed
	if !errors.Is(err, sluice.ErrUnavailable) || !strings.Contains(err.Error(), "connection lost") {
		t.Errorf("Close() = %v, want ErrUnavailable with the call's error", err)
	}
	if again := s.Close(); again != err {
		t.Errorf("second Close() = %v, want the first's %v", again, err)
	}
	// A Store whose checks were all decided closes with nil.
	ok := newStore(t, srv.Client(), redisstore.Options{})
	mustCheck(t, ok, hit("", "k", l))
	if err := ok.Close(); err != nil {
		t.Errorf("Close of an idle Store: %v", err)
	}
}
