// Command edgecg runs one workload of new keys against a Redis, for
// counting Redis's instructions under callgrind (docs/bench-raw/callgrind):
// -mode sync checks each key with the Redis store, -mode first admits each
// on first sight through an edge.Async (FirstSight 1) and records it in
// the background, -mode setnx sends the plain pipelined SET ... NX alone.
// 64 callers; keys are -prefix followed by 0 to -n - 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/redisstore"
)

func main() {
	url := flag.String("url", "", "the Redis URL")
	mode := flag.String("mode", "sync", "sync, first or setnx")
	prefix := flag.String("prefix", "k-", "key prefix")
	n := flag.Int("n", 1000, "keys, each checked once")
	flag.Parse()
	if err := run(*url, *mode, *prefix, *n); err != nil {
		fmt.Fprintln(os.Stderr, "edgecg:", err)
		os.Exit(1)
	}
}

func run(url, mode, prefix string, n int) error {
	ctx := context.Background()
	if mode == "setnx" {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{strings.TrimPrefix(url, "redis://")}})
		if err != nil {
			return err
		}
		defer c.Close()
		for k := 0; k < n; k += 128 {
			cmds := make(rueidis.Commands, 0, 128)
			for j := k; j < min(n, k+128); j++ {
				key := fmt.Sprint("sluice:z{", prefix, j, "}:W60000000")
				cmds = append(cmds, c.B().Set().Key(key).Value("012345678901234567890123").Nx().PxMilliseconds(120000).Build())
			}
			c.DoMulti(ctx, cmds...)
		}
		return nil
	}
	s, err := redisstore.Dial(url, redisstore.Options{Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer s.Close()
	var l sluice.Limiter = s
	var a *edge.Async
	if mode == "first" {
		if a, err = edge.NewAsync(s, edge.AsyncOptions{FirstSight: 1, FlushTimeout: 10 * time.Second}); err != nil {
			return err
		}
		l = a
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	next, failed := 0, 0
	for range 64 {
		wg.Go(func() {
			var d sluice.Decision
			for {
				mu.Lock()
				k := next
				next++
				mu.Unlock()
				if k >= n {
					return
				}
				c := sluice.Check{Cost: 1, Hits: []sluice.Hit{{Zone: "z", Key: fmt.Sprint(prefix, k), Limit: sluice.Limit{Rate: 100, Window: time.Minute}}}}
				if err := l.Check(ctx, c, &d); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if a != nil {
		if err := a.Close(ctx); err != nil {
			return err
		}
		fmt.Printf("%+v\n", a.Stats())
	}
	if failed > 0 {
		return fmt.Errorf("%d checks failed", failed)
	}
	return nil
}
