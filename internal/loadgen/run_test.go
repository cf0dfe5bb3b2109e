package loadgen

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// sleepOp takes d of (fake) time, or stops with the context.
func sleepOp(d time.Duration) Op {
	return func(ctx context.Context, seq uint64) (Result, error) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return Failed, ctx.Err()
		}
		if seq%4 == 3 {
			return Denied, nil
		}
		return Allowed, nil
	}
}

func TestRunDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var seen []Progress
		opts := Options{Concurrency: 4, Duration: 100 * time.Millisecond, ProgressEvery: 25 * time.Millisecond,
			Progress: func(p Progress) { mu.Lock(); seen = append(seen, p); mu.Unlock() }}
		r, err := Run(t.Context(), opts, func(int) (Op, error) { return sleepOp(3 * time.Millisecond), nil })
		if err != nil {
			t.Fatal(err)
		}
		// 33 operations of 3 ms fit in 100 ms per worker; the 34th is cut.
		if r.Ops != 4*33 || r.Allowed != 4*25 || r.Denied != 4*8 || r.Errors != 0 {
			t.Errorf("ops %d allowed %d denied %d errors %d; want 132, 100, 32, 0", r.Ops, r.Allowed, r.Denied, r.Errors)
		}
		if r.Elapsed != 100*time.Millisecond || r.Rate() != 1320 {
			t.Errorf("elapsed %v rate %.1f; want 100ms, 1320/s", r.Elapsed, r.Rate())
		}
		if got := r.Latency.Quantile(0.99); got < 3*time.Millisecond || got > 3*time.Millisecond*1009/1000 {
			t.Errorf("p99 %v, want 3ms", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) < 3 {
			t.Fatalf("%d progress reports, want >= 3", len(seen))
		}
		for i := 1; i < len(seen); i++ {
			if seen[i].Ops < seen[i-1].Ops || seen[i].Elapsed <= seen[i-1].Elapsed {
				t.Errorf("progress went backwards: %+v then %+v", seen[i-1], seen[i])
			}
		}
		if seen[0].Elapsed != 25*time.Millisecond || seen[0].Ops != 4*8 {
			t.Errorf("first progress %+v, want 32 ops at 25ms", seen[0])
		}
	})
}

func TestRunRequestsAndErrors(t *testing.T) {
	boom := errors.New("boom")
	op := func(ctx context.Context, seq uint64) (Result, error) {
		if seq%10 == 9 {
			return Failed, boom
		}
		return Allowed, nil
	}
	r, err := Run(context.Background(), Options{Concurrency: 3, Requests: 95}, func(int) (Op, error) { return op, nil })
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != 95 || r.Allowed+r.Errors != 95 || r.Latency.Count() != r.Allowed {
		t.Errorf("ops %d allowed %d errors %d timed %d; want 95 in all", r.Ops, r.Allowed, r.Errors, r.Latency.Count())
	}
	if r.Errors == 0 || !errors.Is(r.FirstError, boom) {
		t.Errorf("errors %d, first %v; want some, boom", r.Errors, r.FirstError)
	}
}

func TestRunSetupError(t *testing.T) {
	_, err := Run(context.Background(), Options{Concurrency: 2, Requests: 1}, func(w int) (Op, error) {
		if w == 1 {
			return nil, errors.New("no connection")
		}
		return sleepOp(0), nil
	})
	if err == nil {
		t.Fatal("want the worker's setup error")
	}
	if _, err := Run(context.Background(), Options{Concurrency: -1}, nil); err == nil {
		t.Fatal("negative concurrency: want an error")
	}
}
