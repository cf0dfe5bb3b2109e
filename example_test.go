package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

func ExampleParseLimit() {
	l, err := sluice.ParseLimit("20r/30s")
	if err != nil {
		panic(err)
	}
	fmt.Println(l.Rate, l.Window, l.Algo(), l)

	_, err = sluice.ParseLimit("10r/minute")
	fmt.Println(errors.Is(err, sluice.ErrInvalid))
	fmt.Println(err)
	// Output:
	// 20 30s sliding-window 20r/30s
	// true
	// sluice: invalid input: limit "10r/minute": period "minute" must be s, m, h, d or a count with a unit such as 30s (want <rate>r/<period>, such as 100r/s, 10r/m or 20r/30s)
}

func ExampleParseLimits() {
	limits, err := sluice.ParseLimits("1r/5s, 5r/h")
	if err != nil {
		panic(err)
	}
	for _, l := range limits {
		fmt.Println(l.Rate, "per", l.Window)
	}
	// Output:
	// 1 per 5s
	// 5 per 1h0m0s
}

func ExampleLimit_String() {
	fmt.Println(sluice.Limit{Rate: 3, Window: 90 * time.Minute})
	fmt.Println(sluice.Limit{Rate: 100, Window: 24 * time.Hour, Name: "daily"}.Label())
	// Output:
	// 3r/1h30m
	// daily
}

// A fresh 10r/m admits exactly ten checks; the eleventh is denied and says
// how long to wait. The clock is fixed to make the output reproducible.
func ExampleLimiter() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	limit := sluice.Limit{Rate: 10, Window: time.Minute, Algorithm: sluice.Log}
	check := sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: "client-42", Limit: limit}}, Cost: 1}
	var d sluice.Decision
	for range 11 {
		if err := store.Check(context.Background(), check, &d); err != nil {
			panic(err)
		}
	}
	fmt.Println(d.Allowed, d.Hits[0].Remaining, d.RetryAfter())
	// Output: false 0 1m0s
}

func ExampleAllow() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	perSecond := sluice.Limit{Rate: 2, Window: time.Second, Algorithm: sluice.GCRA}
	for range 3 {
		d, err := sluice.Allow(context.Background(), store, "client-42", perSecond)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.RetryAfter())
	}
	// Output:
	// true 0s
	// true 0s
	// false 500ms
}

// Several limits on one key are decided together: the check is allowed
// only if every limit allows it, and a denial spends nothing on any of
// them.
func ExampleCheck_severalLimits() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	limits, err := sluice.ParseLimits("1r/5s, 5r/h")
	if err != nil {
		panic(err)
	}
	check := sluice.Check{Cost: 1}
	for _, l := range limits {
		l.Algorithm = sluice.Log
		check.Hits = append(check.Hits, sluice.Hit{Key: "user-7", Limit: l})
	}
	var d sluice.Decision
	for _, at := range []int{0, 5, 10, 15, 20, 25} {
		now = time.Date(2026, 1, 1, 12, 0, at, 0, time.UTC)
		if err := store.Check(context.Background(), check, &d); err != nil {
			panic(err)
		}
		fmt.Printf("t=%2ds allowed=%v", at, d.Allowed)
		if i, ok := d.Denier(); ok {
			fmt.Printf(" denied by %s, retry after %v", check.Hits[i].Limit, d.RetryAfter())
		}
		fmt.Println()
	}
	// Output:
	// t= 0s allowed=true
	// t= 5s allowed=true
	// t=10s allowed=true
	// t=15s allowed=true
	// t=20s allowed=true
	// t=25s allowed=false denied by 5r/h, retry after 59m35s
}

// Shadow mode measures without enforcing: the check is allowed, and the
// decision says the limit would have denied it.
func ExampleLimit_shadow() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	trial := sluice.Limit{Rate: 2, Window: time.Second, Shadow: true}
	check := sluice.Check{Hits: []sluice.Hit{{Key: "k", Limit: trial}}, Cost: 1}
	var d sluice.Decision
	for range 3 {
		if err := store.Check(context.Background(), check, &d); err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Shadowed, d.Hits[0].Used)
	}
	// Output:
	// true false 1
	// true false 2
	// true true 3
}
