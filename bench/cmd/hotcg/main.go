// Command hotcg makes -n hot denials on a memory store, for counting their
// instructions under callgrind (docs/bench.md, "Memory store against
// in-memory limiters"): 10 keys shaped like user IDs, each pushed over a
// limit of 100 a day of -algorithm (a day, so that no check is allowed
// again while callgrind runs), then checked in turn, one hit of cost 1
// per check, reusing one Decision and hit slice. The whole program's
// count for two values of -n, their difference over the difference of
// -n, is the cost of one check with start-up cancelled.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

func main() {
	n := flag.Int("n", 100_000, "hot checks")
	a := flag.String("algorithm", string(sluice.SlidingWindow), "the limit's algorithm")
	flag.Parse()
	if err := run(*n, sluice.Algorithm(*a)); err != nil {
		fmt.Fprintln(os.Stderr, "hotcg:", err)
		os.Exit(1)
	}
}

func run(n int, a sluice.Algorithm) error {
	s, err := memstore.New(memstore.Options{})
	if err != nil {
		return err
	}
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%08d", i*7919)
	}
	ctx := context.Background()
	var d sluice.Decision
	hits := []sluice.Hit{{Limit: sluice.Limit{Rate: 100, Window: 24 * time.Hour, Algorithm: a}}}
	check := func(key string) error {
		hits[0].Key = key
		return s.Check(ctx, sluice.Check{Hits: hits, Cost: 1}, &d)
	}
	for _, k := range keys {
		for range 101 {
			if err := check(k); err != nil {
				return err
			}
		}
	}
	for i := range n {
		if err := check(keys[i%len(keys)]); err != nil {
			return err
		}
		if d.Allowed {
			return fmt.Errorf("check %d on %q allowed, want every check denied", i, keys[i%len(keys)])
		}
	}
	return nil
}
