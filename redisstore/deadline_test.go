package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
)

// hungScripter stands for a Redis that never answers: every call waits for
// its context.
type hungScripter struct{}

func (hungScripter) EvalSha(ctx context.Context, _ string, _, _ []string) ([]int64, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h hungScripter) Eval(ctx context.Context, _ string, keys, args []string) ([]int64, error) {
	return h.EvalSha(ctx, "", keys, args)
}

func (hungScripter) Cluster() bool { return false }

// TestCoalescedTimeoutBoundsEachCheck: with Redis hung, checks started one
// ms apart (so that later ones queue behind hung batch calls) each fail
// with ErrUnavailable within their own Timeout, although coalesced checks
// have no timer of their own.
func TestCoalescedTimeoutBoundsEachCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 50 * time.Millisecond
		s, err := redisstore.NewWithScripter(hungScripter{}, redisstore.Options{Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Millisecond)
				start := time.Now()
				var d sluice.Decision
				err := s.Check(context.Background(), hit("", "k", tenPerMinute), &d)
				if !errors.Is(err, sluice.ErrUnavailable) {
					t.Errorf("check %d with Redis hung = %v, want ErrUnavailable", i, err)
				}
				if took := time.Since(start); took > timeout {
					t.Errorf("check %d took %v, more than the %v timeout", i, took, timeout)
				}
			})
		}
		wg.Wait()
	})
}

// slowScripter stands for a healthy Redis near saturation: every call is
// answered, each after 30 ms, below the 50 ms timeout. It answers
// decide.lua for one-hit sliding-window checks: every check allowed, every
// state empty.
type slowScripter struct{}

func (slowScripter) EvalSha(ctx context.Context, _ string, keys, _ []string) ([]int64, error) {
	select {
	case <-time.After(30 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	reply := []int64{time.Now().UnixMicro()}
	for range keys {
		reply = append(reply, 1, 1, 0, 0, 0) // allowed; fits, index, cur, prev
	}
	return reply, nil
}

func (s slowScripter) Eval(ctx context.Context, _ string, keys, args []string) ([]int64, error) {
	return s.EvalSha(ctx, "", keys, args)
}

func (slowScripter) Cluster() bool { return false }

// TestSaturatedIsNotUnhealthy: 400 concurrent checks on a Redis that
// answers every call in 30 ms, with the default 50 ms timeout and batches
// of 8, so that the last checks wait far longer than 50 ms in the queue.
// None fails: the timeout bounds a call from when it is sent, and a
// saturated Redis that answers in time is healthy.
func TestSaturatedIsNotUnhealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := redisstore.NewWithScripter(slowScripter{}, redisstore.Options{MaxBatch: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var wg sync.WaitGroup
		var longest time.Duration
		var mu sync.Mutex
		for i := range 400 {
			wg.Go(func() {
				start := time.Now()
				var d sluice.Decision
				if err := s.Check(context.Background(), hit("", fmt.Sprint("k", i), tenPerMinute), &d); err != nil {
					t.Errorf("check %d: %v", i, err)
				}
				mu.Lock()
				longest = max(longest, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		if longest < 500*time.Millisecond {
			t.Fatalf("the longest check took %v: the queue was never long, the test shows nothing", longest)
		}
		t.Logf("the longest check waited %v, with no error", longest)
	})
}

// keyCounter is slowScripter counting the checks (keys) it was sent.
type keyCounter struct {
	slowScripter
	sent *atomic.Int64
}

func (s keyCounter) EvalSha(ctx context.Context, sha string, keys, args []string) ([]int64, error) {
	s.sent.Add(int64(len(keys)))
	return s.slowScripter.EvalSha(ctx, sha, keys, args)
}

func (s keyCounter) Eval(ctx context.Context, _ string, keys, args []string) ([]int64, error) {
	return s.EvalSha(ctx, "", keys, args)
}

// TestAbandonedChecksAreNotSent: checks whose callers gave up while they
// waited in the queue are answered with the callers' error and never
// sent, so a Redis behind its load does not spend its time recording cost
// for requests that have already failed.
func TestAbandonedChecksAreNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int64
		s, err := redisstore.NewWithScripter(keyCounter{sent: &sent}, redisstore.Options{MaxBatch: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range 400 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				var d sluice.Decision
				if err := s.Check(ctx, hit("", fmt.Sprint("k", i), tenPerMinute), &d); err != nil {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		s.Close()
		if failed.Load() == 0 {
			t.Fatal("no caller gave up: the test shows nothing")
		}
		// Two calls of 8 in flight every 30 ms: about 64 checks in the
		// 100 ms the callers wait, and those already sent.
		if n := sent.Load(); n > 100 {
			t.Errorf("%d checks sent for %d callers that waited, %d of which gave up; want only those sent before their callers left", n, 400, failed.Load())
		}
	})
}
