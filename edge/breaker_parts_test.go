package edge_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
)

// nodes is a test double of a store made of parts (not of Redis): a real
// memory store behind, whose keys "<node>/<name>" belong to part <node>;
// the keys of a node set down fail at once with sluice.ErrUnavailable, as
// a refused connection. It is an edge.Partitioner.
type nodes struct {
	next sluice.Limiter

	mu    sync.Mutex
	down  map[string]bool
	parts []string
	calls map[string]int
}

func newNodes(t *testing.T, parts ...string) *nodes {
	t.Helper()
	return &nodes{next: newMemstore(t, nil), down: map[string]bool{}, parts: parts, calls: map[string]int{}}
}

func nodeOf(key string) string {
	node, _, _ := strings.Cut(key, "/")
	return node
}

// Part implements edge.Partitioner: the node of every hit, or "" when
// they differ.
func (n *nodes) Part(c sluice.Check) string {
	if len(c.Hits) == 0 {
		return ""
	}
	part := nodeOf(c.Hits[0].Key)
	for _, h := range c.Hits[1:] {
		if nodeOf(h.Key) != part {
			return ""
		}
	}
	return part
}

// Parts implements edge.Partitioner.
func (n *nodes) Parts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.parts)
}

func (n *nodes) setParts(parts ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.parts = parts
}

func (n *nodes) setDown(node string, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[node] = down
}

// callsTo returns the store calls made so far for node's keys.
func (n *nodes) callsTo(node string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[node]
}

func (n *nodes) fail(c sluice.Check) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range c.Hits {
		node := nodeOf(h.Key)
		n.calls[node]++
		if n.down[node] {
			return fmt.Errorf("nodes: %w: connection to %s refused", sluice.ErrUnavailable, node)
		}
	}
	return nil
}

func (n *nodes) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if err := n.fail(c); err != nil {
		return err
	}
	return n.next.Check(ctx, c, d)
}

func (n *nodes) Reset(ctx context.Context, c sluice.Check) error {
	if err := n.fail(c); err != nil {
		return err
	}
	return n.next.Reset(ctx, c)
}

func partStats(b *edge.Breaker, name string) (edge.PartStats, bool) {
	for _, p := range b.Parts() {
		if p.Name == name {
			return p, true
		}
	}
	return edge.PartStats{}, false
}

// TestBreakerPartsFailAlone: with a Partitioner, the failures of one
// part's calls open that part alone; the checks of the other parts still
// go to the store, and the failed part's come back after its back-off.
func TestBreakerPartsFailAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNodes(t, "a", "b", "c")
		g := newGuard(t, n, edge.GuardOptions{}) // the store is its breaker's Partitioner
		n.setDown("a", true)
		for i := range 100 {
			key := fmt.Sprintf("%c/%d", "abc"[i%3], i)
			d := mustCheck(t, g, check(1, hit(key, "10r/m", sluice.SlidingWindow)))
			if nodeOf(key) != "a" && d.Source != sluice.FromStore {
				t.Fatalf("check %d of %s while a is down: source %v, want the store", i, key, d.Source)
			}
		}
		a, _ := partStats(g.Breaker(), "a")
		if a.State != edge.BreakerOpen || a.Opens != 1 || a.Errors != edge.DefaultFailures || a.Skipped != 34-edge.DefaultFailures {
			t.Fatalf("part a: %+v, want open once, %d errors and the other %d of its 34 checks skipped", a, edge.DefaultFailures, 34-edge.DefaultFailures)
		}
		if calls := n.callsTo("a"); calls != edge.DefaultFailures {
			t.Errorf("%d calls for a's keys, want %d: the rest skipped by a's open breaker", calls, edge.DefaultFailures)
		}
		for _, name := range []string{"", "b", "c"} {
			if p, _ := partStats(g.Breaker(), name); p.State != edge.BreakerClosed || p.Opens != 0 || p.Errors != 0 || p.Skipped != 0 {
				t.Errorf("part %q: %+v, want closed, never opened, no error", name, p)
			}
		}
		if s := g.Breaker().Stats(); s.State != edge.BreakerOpen || s.Opens != 1 {
			t.Errorf("breaker: %+v, want open (a part is) and opened once", s)
		}
		// A check across parts shares the state of the store as a whole.
		across := check(1, hit("a/x", "10r/m", sluice.SlidingWindow), hit("b/x", "10r/m", sluice.SlidingWindow))
		if d := mustCheck(t, g, across); d.Source != sluice.FromFailOpen {
			t.Errorf("check across a and b: source %v, want fail-open (a refuses)", d.Source)
		}
		if p, _ := partStats(g.Breaker(), ""); p.Failures != 1 || p.State != edge.BreakerClosed {
			t.Errorf("the whole store's part after a failed check across parts: %+v, want 1 failure, closed", p)
		}
		n.setDown("a", false)
		time.Sleep(edge.DefaultBackoff)
		if d := mustCheck(t, g, check(1, hit("a/back", "10r/m", sluice.SlidingWindow))); d.Source != sluice.FromStore {
			t.Errorf("a's check after its back-off: source %v, want the store", d.Source)
		}
		if a, _ := partStats(g.Breaker(), "a"); a.State != edge.BreakerClosed {
			t.Errorf("part a after it answered: %v, want closed", a.State)
		}
	})
}

// TestBreakerForgetsGoneParts: a part the Partitioner no longer names (a
// failed master replaced) leaves the breaker's state and its Parts; the
// breaker's counters keep its events.
func TestBreakerForgetsGoneParts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNodes(t, "a", "b")
		b, err := edge.NewBreaker(edge.BreakerOptions{Parts: n})
		if err != nil {
			t.Fatal(err)
		}
		g := newGuard(t, n, edge.GuardOptions{Breaker: b})
		n.setDown("a", true)
		for i := range edge.DefaultFailures {
			mustCheck(t, g, check(1, hit(fmt.Sprint("a/", i), "10r/m", sluice.SlidingWindow)))
		}
		mustCheck(t, g, check(1, hit("b/1", "10r/m", sluice.SlidingWindow)))
		if s := b.Stats(); s.State != edge.BreakerOpen {
			t.Fatalf("breaker %v with a open, want open", s.State)
		}
		n.setParts("b", "a2") // a failed over to a2
		var names []string
		for _, p := range b.Parts() {
			names = append(names, p.Name)
		}
		if want := []string{"", "b"}; !slices.Equal(names, want) {
			t.Errorf("parts %q after a left, want %q", names, want)
		}
		if s := b.Stats(); s.State != edge.BreakerClosed || s.Opens != 1 {
			t.Errorf("breaker %+v after a left, want closed with a's open counted", s)
		}
	})
}

// TestBreakerMaxParts: past MaxBreakerParts names, a new part shares the
// state of the store as a whole, so a Partitioner with unbounded names
// cannot grow the breaker without bound.
func TestBreakerMaxParts(t *testing.T) {
	many := make([]string, edge.MaxBreakerParts+10)
	for i := range many {
		many[i] = fmt.Sprint("n", i)
	}
	n := newNodes(t, many...)
	b, err := edge.NewBreaker(edge.BreakerOptions{Parts: n})
	if err != nil {
		t.Fatal(err)
	}
	g := newGuard(t, n, edge.GuardOptions{Breaker: b})
	for _, name := range many {
		mustCheck(t, g, check(1, hit(name+"/k", "10r/m", sluice.SlidingWindow)))
	}
	if got := len(b.Parts()); got != edge.MaxBreakerParts+1 {
		t.Errorf("%d parts after %d names, want %d and the whole store", got, len(many), edge.MaxBreakerParts)
	}
	n.setDown("n1033", true) // past the bound: the whole store's part
	for range edge.DefaultFailures {
		mustCheck(t, g, check(1, hit("n1033/k", "10r/m", sluice.SlidingWindow)))
	}
	if p, _ := partStats(b, ""); p.State != edge.BreakerOpen {
		t.Errorf("the whole store's part after the failures of a part past the bound: %v, want open", p.State)
	}
}
