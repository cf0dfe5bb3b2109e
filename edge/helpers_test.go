package edge_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// mode is how a flaky store answers.
type mode int32

const (
	answer mode = iota // pass the check to the real store behind
	refuse             // fail at once with sluice.ErrUnavailable, as a refused connection
	hang               // answer nothing until the call's context ends, as a stopped server
	reject             // fail with sluice.ErrInvalid, as a store validating input
)

// flaky is a test double of the sluice.Limiter interface (not of Redis): a
// real store behind a switch that makes it fail on demand, counting calls.
type flaky struct {
	next  sluice.Limiter
	mode  atomic.Int32
	calls atomic.Int64
}

func newFlaky(t *testing.T, now func() time.Time) *flaky {
	t.Helper()
	return &flaky{next: newMemstore(t, now)}
}

func (f *flaky) set(m mode) { f.mode.Store(int32(m)) }

func (f *flaky) fail(ctx context.Context) error {
	f.calls.Add(1)
	switch mode(f.mode.Load()) {
	case refuse:
		return fmt.Errorf("flaky: %w: connection refused", sluice.ErrUnavailable)
	case hang:
		<-ctx.Done()
		return fmt.Errorf("flaky: %w", ctx.Err())
	case reject:
		return fmt.Errorf("flaky: %w: rejected", sluice.ErrInvalid)
	}
	return nil
}

func (f *flaky) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if err := f.fail(ctx); err != nil {
		return err
	}
	return f.next.Check(ctx, c, d)
}

func (f *flaky) Reset(ctx context.Context, c sluice.Check) error {
	if err := f.fail(ctx); err != nil {
		return err
	}
	return f.next.Reset(ctx, c)
}

func newMemstore(t testing.TB, now func() time.Time) *memstore.Store {
	t.Helper()
	m, err := memstore.New(memstore.Options{Now: now, MaxKeys: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// clock is a fake clock for tests outside a synctest bubble.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// records is a slog.Handler that keeps every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}

// messages returns the messages logged so far and the int64 value of attr
// in each (0 when absent).
func (r *records) messages(attr string) (msgs []string, vals []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		msgs = append(msgs, rec.Message)
		var v int64
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == attr {
				v = a.Value.Int64()
			}
			return true
		})
		vals = append(vals, v)
	}
	return msgs, vals
}

func hit(key, spec string, algo sluice.Algorithm) sluice.Hit {
	l, err := sluice.ParseLimit(spec)
	if err != nil {
		panic(err)
	}
	l.Algorithm = algo
	return sluice.Hit{Zone: "z", Key: key, Limit: l}
}

func check(cost int64, hits ...sluice.Hit) sluice.Check {
	return sluice.Check{Hits: hits, Cost: cost}
}

func mustCheck(t testing.TB, l sluice.Limiter, c sluice.Check) sluice.Decision {
	t.Helper()
	var d sluice.Decision
	if err := l.Check(context.Background(), c, &d); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return d
}

// atomicInt is an int64 counter safe for concurrent use.
type atomicInt struct{ atomic.Int64 }

// testingProcs is GOMAXPROCS, by which RunParallel multiplies its
// parallelism.
func testingProcs() int { return runtime.GOMAXPROCS(0) }
