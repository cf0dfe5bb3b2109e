package redisstore_test

import (
	"context"
	"errors"
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
