package edge_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/memstore"
)

// down is a store that cannot be reached.
type down struct{}

func (down) Check(context.Context, sluice.Check, *sluice.Decision) error {
	return fmt.Errorf("example: %w: connection refused", sluice.ErrUnavailable)
}

func (down) Reset(context.Context, sluice.Check) error {
	return errors.ErrUnsupported
}

// Two zones in front of one store share its breaker, each with its own
// failure policy.
func ExampleGuard() {
	breaker, _ := edge.NewBreaker(edge.BreakerOptions{Name: "redis"})
	api, _ := edge.NewGuard(down{}, edge.GuardOptions{Breaker: breaker, Policy: edge.PolicyOpen})
	login, _ := edge.NewGuard(down{}, edge.GuardOptions{Breaker: breaker, Policy: edge.PolicyClosed})

	limit, _ := sluice.ParseLimit("10r/m")
	c := sluice.Check{Hits: []sluice.Hit{{Key: "203.0.113.7", Limit: limit}}, Cost: 1}
	var d sluice.Decision
	for range edge.DefaultFailures {
		api.Check(context.Background(), c, &d)
	}
	fmt.Println("api:", d.Allowed, d.Source)
	login.Check(context.Background(), c, &d)
	fmt.Println("login:", d.Allowed, d.Source)
	fmt.Println("breaker:", breaker.State(), "skipped by login:", login.Stats().Skipped)
	// Output:
	// api: true fail-open
	// login: false fail-closed
	// breaker: open skipped by login: 1
}

// After the store denies a check, the same check is denied without it until
// its RetryAfter.
func ExampleDenyCache() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store, _ := memstore.New(memstore.Options{Now: clock})
	limiter, _ := edge.NewDenyCache(store, edge.DenyCacheOptions{Now: clock})

	limit, _ := sluice.ParseLimit("2r/m")
	limit.Algorithm = sluice.Log
	c := sluice.Check{Hits: []sluice.Hit{{Key: "user-42", Limit: limit}}, Cost: 1}
	var d sluice.Decision
	for range 4 {
		limiter.Check(context.Background(), c, &d)
		fmt.Println(d.Allowed, d.Source, d.RetryAfter())
		now = now.Add(10 * time.Second)
	}
	fmt.Println("cache hits:", limiter.Stats().Hits)
	// Output:
	// true store 0s
	// true store 0s
	// false store 40s
	// false deny-cache 30s
	// cache hits: 1
}

// An Async limiter decides from its view of the store's usage and sends
// the cost in the background; Close sends what is still owed. A key's
// first three checks go to the store: the third answer becomes its view.
func ExampleAsync() {
	store, _ := memstore.New(memstore.Options{})
	limiter, _ := edge.NewAsync(store, edge.AsyncOptions{SyncInterval: time.Second})

	limit, _ := sluice.ParseLimit("100r/h")
	c := sluice.Check{Hits: []sluice.Hit{{Key: "user-42", Limit: limit}}, Cost: 1}
	var d sluice.Decision
	for range 4 {
		limiter.Check(context.Background(), c, &d)
		fmt.Println(d.Allowed, d.Source, d.Hits[0].Remaining)
	}
	limiter.Close(context.Background())

	c.Cost = 0 // a peek
	store.Check(context.Background(), c, &d)
	fmt.Println("recorded by the store:", d.Hits[0].Used)
	// Output:
	// true store 99
	// true store 98
	// true store 97
	// true local-view 96
	// recorded by the store: 4
}
