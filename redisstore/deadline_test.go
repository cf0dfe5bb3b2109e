package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
