package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/keyname"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a
// logger.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestBadStateIsNotAnOutage: foreign data under the prefix (a list where a
// limit's state belongs) fails the checks of that key alone, with
// sluice.ErrBadState, logged by the key's digest, never its text. A Guard
// in front, under the closed policy, does not count them: after more bad
// checks than its breaker's threshold the breaker is closed, and a healthy
// key is still decided by the store (before, the fifth bad check opened
// the breaker and the healthy key was denied by the policy).
func TestBadStateIsNotAnOutage(t *testing.T) {
	srv := redistest.Standalone(t)
	const badKey = "foreign-key-7d1c"
	var logs lockedBuffer
	for _, batch := range []int{1, redisstore.DefaultMaxBatch} {
		prefix := "bs" + string(rune('a'+batch%26)) + ":"
		store := newStore(t, srv.Client(), redisstore.Options{Prefix: prefix, MaxBatch: batch,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		l := sluice.Limit{Rate: 3, Window: time.Minute}
		if err := srv.Do("LPUSH", prefix+"{"+badKey+"}:W60000000", "x").Error(); err != nil {
			t.Fatal(err)
		}
		breaker, err := edge.NewBreaker(edge.BreakerOptions{Failures: 2})
		if err != nil {
			t.Fatal(err)
		}
		g, err := edge.NewGuard(store, edge.GuardOptions{Policy: edge.PolicyClosed, Breaker: breaker})
		if err != nil {
			t.Fatal(err)
		}
		var d sluice.Decision
		for range 5 {
			err := g.Check(context.Background(), hit("", badKey, l), &d)
			if !errors.Is(err, sluice.ErrBadState) || errors.Is(err, sluice.ErrUnavailable) {
				t.Fatalf("MaxBatch %d: the bad key's check: %v, want ErrBadState and not ErrUnavailable", batch, err)
			}
			if strings.Contains(err.Error(), badKey) {
				t.Errorf("the error names the key: %v", err)
			}
		}
		if err := g.Check(context.Background(), hit("", "healthy", l), &d); err != nil || !d.Allowed || d.Source != sluice.FromStore {
			t.Errorf("MaxBatch %d: a healthy key after the bad ones: %v, allowed %v from %v; want allowed from the store", batch, err, d.Allowed, d.Source)
		}
		if st := g.Stats(); st.StoreErrors != 0 || st.Degraded() != 0 || breaker.Stats().State != edge.BreakerClosed {
			t.Errorf("MaxBatch %d: guard %+v, breaker %v: the bad key counted as an outage", batch, st, breaker.Stats().State)
		}
		// Reset deletes the foreign data; the key works again.
		if err := store.Reset(context.Background(), hit("", badKey, l)); err != nil {
			t.Fatal(err)
		}
		if d := mustCheck(t, store, hit("", badKey, l)); !d.Allowed {
			t.Errorf("after Reset, the key's check is %+v, want allowed", d)
		}
	}
	out := logs.String()
	if !strings.Contains(out, keyname.Of(badKey)) || strings.Contains(out, badKey) {
		t.Errorf("log %q: want the key's digest %s and never the key", out, keyname.Of(badKey))
	}
}
