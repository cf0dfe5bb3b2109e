package edge_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/internal/storetest"
)

var tenPerMinute = hit("k", "10r/m", sluice.Log)

func newGuard(t *testing.T, store sluice.Limiter, opts edge.GuardOptions) *edge.Guard {
	t.Helper()
	g, err := edge.NewGuard(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGuardPolicies(t *testing.T) {
	tests := []struct {
		policy      edge.Policy
		wantAllowed bool
		wantSource  sluice.Source
		wantHits    int
	}{
		{edge.PolicyOpen, true, sluice.FromFailOpen, 0},
		{edge.PolicyClosed, false, sluice.FromFailClosed, 0},
		{edge.PolicyLocal, true, sluice.FromFallback, 1},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			f := newFlaky(t, nil)
			f.set(refuse)
			g := newGuard(t, f, edge.GuardOptions{Policy: tt.policy})
			d := mustCheck(t, g, check(1, tenPerMinute))
			if d.Allowed != tt.wantAllowed || d.Source != tt.wantSource || len(d.Hits) != tt.wantHits {
				t.Errorf("got allowed %v, source %v, %d hits; want %v, %v, %d",
					d.Allowed, d.Source, len(d.Hits), tt.wantAllowed, tt.wantSource, tt.wantHits)
			}
			if !d.Source.Degraded() {
				t.Errorf("source %v is not degraded", d.Source)
			}
			if tt.policy != edge.PolicyLocal && storetest.DenierOf(d) != -1 {
				t.Errorf("Denier = %d, want -1 with no hit results", storetest.DenierOf(d))
			}
			s := g.Stats()
			if s.Degraded() != 1 || s.StoreErrors != 1 {
				t.Errorf("stats %+v: want 1 degraded decision, 1 store error", s)
			}
		})
	}
}

func TestGuardLocalPolicyLimits(t *testing.T) {
	f := newFlaky(t, nil)
	f.set(refuse)
	g := newGuard(t, f, edge.GuardOptions{Policy: edge.PolicyLocal})
	for i := range 10 {
		if d := mustCheck(t, g, check(1, tenPerMinute)); !d.Allowed {
			t.Fatalf("check %d denied by the fallback, want allowed", i+1)
		}
	}
	d := mustCheck(t, g, check(1, tenPerMinute))
	if d.Allowed || d.Source != sluice.FromFallback || storetest.DenierOf(d) != 0 || d.Hits[0].Remaining != 0 {
		t.Errorf("11th check: %+v, want denied by hit 0 of the fallback", d)
	}
	if got := g.Stats().Fallback; got != 11 {
		t.Errorf("Stats().Fallback = %d, want 11", got)
	}
}

func TestGuardPassesStoreAnswers(t *testing.T) {
	f := newFlaky(t, nil)
	g := newGuard(t, f, edge.GuardOptions{Policy: edge.PolicyClosed})
	for range 10 {
		mustCheck(t, g, check(1, tenPerMinute))
	}
	d := mustCheck(t, g, check(1, tenPerMinute))
	if d.Allowed || d.Source != sluice.FromStore || len(d.Hits) != 1 {
		t.Errorf("11th check: %+v, want the store's denial", d)
	}
	if s := g.Stats(); s != (edge.GuardStats{}) {
		t.Errorf("stats %+v after a healthy store, want zero", s)
	}
}

func TestGuardInvalidInputIsNotAnOutage(t *testing.T) {
	bad := check(11, tenPerMinute) // cost above the rate
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		g := newGuard(t, f, edge.GuardOptions{})
		for range 20 {
			var d sluice.Decision
			if err := g.Check(t.Context(), bad, &d); !errors.Is(err, sluice.ErrInvalid) {
				t.Fatalf("Check(bad) = %v, want ErrInvalid", err)
			}
		}
		if s := g.Breaker().Stats(); s.State != edge.BreakerClosed || s.Failures != 0 {
			t.Errorf("breaker %+v after invalid input, want closed with no failures", s)
		}
		// With the store down and the breaker open, bad input is still an
		// error, not a fail-open allow.
		f.set(refuse)
		for range edge.DefaultFailures {
			mustCheck(t, g, check(1, tenPerMinute))
		}
		if st := g.Breaker().State(); st != edge.BreakerOpen {
			t.Fatalf("breaker %v, want open", st)
		}
		var d sluice.Decision
		if err := g.Check(t.Context(), bad, &d); !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("Check(bad) with the breaker open = %v, want ErrInvalid", err)
		}
	})
}

func TestGuardTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		f.set(hang)
		g := newGuard(t, f, edge.GuardOptions{Timeout: 30 * time.Millisecond})
		start := time.Now()
		d := mustCheck(t, g, check(1, tenPerMinute))
		if took := time.Since(start); took != 30*time.Millisecond {
			t.Errorf("a hanging store took %v to fail open, want the 30ms timeout", took)
		}
		if d.Source != sluice.FromFailOpen {
			t.Errorf("source %v, want fail-open", d.Source)
		}
		if s := g.Stats(); s.Timeouts != 1 || s.StoreErrors != 1 {
			t.Errorf("stats %+v, want 1 timeout, 1 store error", s)
		}
	})
}

func TestGuardCallerDeadlineIsAStoreFailure(t *testing.T) {
	for _, p := range []edge.Policy{edge.PolicyClosed, edge.PolicyLocal} {
		t.Run(p.String(), func(t *testing.T) { testCallerDeadline(t, p) })
	}
}

func testCallerDeadline(t *testing.T, p edge.Policy) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		f.set(hang)
		g := newGuard(t, f, edge.GuardOptions{Policy: p})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		var d sluice.Decision
		if err := g.Check(ctx, check(1, tenPerMinute), &d); err != nil {
			t.Fatalf("Check with the caller's deadline passing in the store: %v, want a decision", err)
		}
		want := sluice.FromFailClosed
		if p == edge.PolicyLocal {
			want = sluice.FromFallback
		}
		if took := time.Since(start); took != 10*time.Millisecond || d.Source != want {
			t.Errorf("took %v, source %v; want the caller's 10ms, %v", took, d.Source, want)
		}
		if s := g.Stats(); s.StoreErrors != 1 || s.Timeouts != 1 {
			t.Errorf("stats %+v, want 1 timeout", s)
		}
		// A context already done never reaches the store.
		calls := f.calls.Load()
		if err := g.Check(ctx, check(1, tenPerMinute), &d); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Check with a done context = %v, want DeadlineExceeded", err)
		}
		if f.calls.Load() != calls || g.Stats().StoreErrors != 1 {
			t.Errorf("a done context reached the store or counted against it")
		}
	})
}

func TestGuardCallerCancelIsNotAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		f.set(hang)
		g := newGuard(t, f, edge.GuardOptions{})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(10*time.Millisecond, cancel)
		var d sluice.Decision
		if err := g.Check(ctx, check(1, tenPerMinute), &d); !errors.Is(err, context.Canceled) {
			t.Errorf("Check canceled by the caller = %v, want Canceled", err)
		}
		if s := g.Stats(); s.StoreErrors != 0 || s.Degraded() != 0 {
			t.Errorf("stats %+v: the caller's cancel counted against the store", s)
		}
	})
}

func TestGuardReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		g := newGuard(t, f, edge.GuardOptions{Policy: edge.PolicyLocal})
		c := check(1, tenPerMinute)
		for range 10 {
			mustCheck(t, g, c)
		}
		f.set(refuse)
		for range edge.DefaultFailures {
			mustCheck(t, g, c) // opens the breaker; the fallback counts them
		}
		if err := g.Reset(t.Context(), c); !errors.Is(err, sluice.ErrUnavailable) {
			t.Errorf("Reset with the store down = %v, want ErrUnavailable", err)
		}
		// The fallback was reset all the same.
		if d := mustCheck(t, g, c); !d.Allowed || d.Source != sluice.FromFallback {
			t.Errorf("after Reset: %+v, want allowed by the fallback", d)
		}
		f.set(answer)
		time.Sleep(edge.DefaultBackoff)
		if err := g.Reset(t.Context(), c); err != nil {
			t.Fatalf("Reset as the probe: %v", err)
		}
		if d := mustCheck(t, g, c); !d.Allowed || d.Source != sluice.FromStore {
			t.Errorf("after Reset: %+v, want allowed by the store", d)
		}
	})
}

func TestGuardSharedBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFlaky(t, nil)
		b, err := edge.NewBreaker(edge.BreakerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		open := newGuard(t, f, edge.GuardOptions{Breaker: b, Policy: edge.PolicyOpen})
		closed := newGuard(t, f, edge.GuardOptions{Breaker: b, Policy: edge.PolicyClosed})
		f.set(refuse)
		for range edge.DefaultFailures {
			mustCheck(t, open, check(1, tenPerMinute))
		}
		calls := f.calls.Load()
		d := mustCheck(t, closed, check(1, hit("other", "5r/s", sluice.GCRA)))
		if d.Source != sluice.FromFailClosed || f.calls.Load() != calls {
			t.Errorf("closed zone behind an open shared breaker: source %v, %d store calls; want fail-closed, none",
				d.Source, f.calls.Load()-calls)
		}
		if got := closed.Stats().Skipped; got != 1 {
			t.Errorf("Skipped = %d, want 1", got)
		}
	})
}

func TestGuardLogsAreThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &records{}
		f := newFlaky(t, nil)
		f.set(refuse)
		g := newGuard(t, f, edge.GuardOptions{Logger: slog.New(rec), LogInterval: time.Second})
		const n = 1000
		for range n { // 1000 checks over 2.5 s of outage
			mustCheck(t, g, check(1, tenPerMinute))
			time.Sleep(2500 * time.Microsecond)
		}
		msgs, suppressed := rec.messages("suppressed")
		var degraded, total int64
		for i, m := range msgs {
			if m == "edge: check decided without the store" {
				degraded++
				total += 1 + suppressed[i]
			}
		}
		if degraded != 3 {
			t.Errorf("%d lines about degraded decisions over 2.5 s at one per second, want 3: %q", degraded, msgs)
		}
		// The last line was at 2 s; the checks after it are not reported yet.
		if total > n || total < n-500 {
			t.Errorf("the lines stand for %d decisions of %d", total, n)
		}
		if len(msgs) > 10 {
			t.Errorf("%d log lines for one outage, want a handful: %q", len(msgs), msgs)
		}
	})
}

func TestNewGuardValidates(t *testing.T) {
	f := newFlaky(t, nil)
	for _, opts := range []edge.GuardOptions{
		{Policy: edge.Policy(9)},
		{Timeout: -time.Millisecond},
		{LogInterval: -time.Second},
	} {
		if _, err := edge.NewGuard(f, opts); !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("NewGuard(%+v) = %v, want ErrInvalid", opts, err)
		}
	}
	if _, err := edge.NewGuard(nil, edge.GuardOptions{}); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("NewGuard(nil) = %v, want ErrInvalid", err)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want edge.Policy
	}{{"", edge.PolicyOpen}, {"open", edge.PolicyOpen}, {"closed", edge.PolicyClosed}, {"local", edge.PolicyLocal}} {
		got, err := edge.ParsePolicy(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	_, err := edge.ParsePolicy("Open ")
	if !errors.Is(err, sluice.ErrInvalid) || !strings.Contains(err.Error(), `"Open "`) {
		t.Errorf(`ParsePolicy("Open ") = %v, want ErrInvalid quoting the input`, err)
	}
}

// barrier is a test double of a store that fails its first call, then
// makes every call wait until n of them are in flight, so that n detached
// store calls overlap.
type barrier struct {
	failed  atomic.Bool
	arrived sync.WaitGroup
	next    sluice.Limiter
}

func (b *barrier) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if b.failed.CompareAndSwap(false, true) {
		return fmt.Errorf("barrier: %w: connection reset", sluice.ErrUnavailable)
	}
	b.arrived.Done()
	b.arrived.Wait()
	return b.next.Check(ctx, c, d)
}

func (b *barrier) Reset(ctx context.Context, c sluice.Check) error { return b.next.Reset(ctx, c) }

func TestGuardConcurrentChecksShareACheck(t *testing.T) {
	const n = 8
	b := &barrier{next: newMemstore(t, nil)}
	b.arrived.Add(n)
	g := newGuard(t, b, edge.GuardOptions{Timeout: time.Minute})
	mustCheck(t, g, check(1, tenPerMinute)) // the failure: calls are detached now
	for _, s := range checkAll(t, g, n) {
		if s != sluice.FromStore {
			t.Errorf("source %v, want store", s)
		}
	}
}

// checkAll runs n concurrent checks of one shared Check value (as a server
// does with a zone's check template) and returns their sources.
func checkAll(t *testing.T, l sluice.Limiter, n int) []sluice.Source {
	t.Helper()
	sources := make([]sluice.Source, n)
	shared := check(1, hit("k", "100000r/s", sluice.GCRA))
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var d sluice.Decision
			if err := l.Check(context.Background(), shared, &d); err != nil {
				t.Error(err)
			}
			sources[i] = d.Source
		})
	}
	wg.Wait()
	return sources
}

// stubborn is a test double of a store that fails its first call, then
// ignores its context: each call blocks until release is closed, as a
// Redis client does while it reconnects to a server that accepts
// connections and never answers.
type stubborn struct {
	failed  atomic.Bool
	release chan struct{}
	next    sluice.Limiter
}

func newStubborn(t *testing.T) *stubborn {
	return &stubborn{release: make(chan struct{}), next: newMemstore(t, nil)}
}

func (s *stubborn) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if s.failed.CompareAndSwap(false, true) {
		return fmt.Errorf("stubborn: %w: connection reset", sluice.ErrUnavailable)
	}
	<-s.release
	return s.next.Check(context.Background(), c, d) // writes d late
}

func (s *stubborn) Reset(ctx context.Context, c sluice.Check) error {
	<-s.release
	return s.next.Reset(context.Background(), c)
}

// A healthy store is called on the caller's goroutine; once a call has
// failed, calls are detached and the Guard returns at the deadline.

func TestGuardTimeoutWithAStoreIgnoringContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStubborn(t)
		g := newGuard(t, s, edge.GuardOptions{Timeout: 40 * time.Millisecond})
		mustCheck(t, g, check(1, tenPerMinute)) // the failure
		var d sluice.Decision
		start := time.Now()
		if err := g.Check(t.Context(), check(1, tenPerMinute), &d); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 40*time.Millisecond || d.Source != sluice.FromFailOpen {
			t.Errorf("took %v, source %v; want the 40ms timeout, fail-open", took, d.Source)
		}
		if got := g.Stats().Abandoned; got != 1 {
			t.Errorf("Abandoned = %d, want 1", got)
		}
		close(s.release) // the store answers late: into its own decision
		synctest.Wait()
		if d.Source != sluice.FromFailOpen || len(d.Hits) != 0 {
			t.Errorf("the late answer reached the caller's decision: %+v", d)
		}
		if got := g.Stats().Abandoned; got != 0 {
			t.Errorf("Abandoned = %d after the store returned, want 0", got)
		}
	})
}

func TestGuardBoundsAbandonedCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStubborn(t)
		b, err := edge.NewBreaker(edge.BreakerOptions{Failures: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		g := newGuard(t, s, edge.GuardOptions{Breaker: b})
		for range 1 + edge.MaxAbandoned { // the failure, then calls left hanging
			mustCheck(t, g, check(1, tenPerMinute))
		}
		start := time.Now()
		d := mustCheck(t, g, check(1, tenPerMinute))
		if took := time.Since(start); took != 0 || d.Source != sluice.FromFailOpen {
			t.Errorf("past MaxAbandoned: took %v, source %v; want an immediate fail-open", took, d.Source)
		}
		if st := g.Stats(); st.Abandoned != edge.MaxAbandoned || st.StoreErrors != edge.MaxAbandoned+2 {
			t.Errorf("stats %+v, want %d abandoned, %d store errors", st, edge.MaxAbandoned, edge.MaxAbandoned+2)
		}
		close(s.release)
		synctest.Wait()
		if got := g.Stats().Abandoned; got != 0 {
			t.Errorf("Abandoned = %d after the store returned, want 0", got)
		}
	})
}
