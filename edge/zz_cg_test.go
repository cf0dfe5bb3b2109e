package edge_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/edge"
	"github.com/sluicehq/sluice/redisstore"
)

// TestCallgrindWorkload is a helper run by hand against a redis-server
// under callgrind: CG_URL, CG_MODE (sync, first), CG_PREFIX, CG_N.
func TestCallgrindWorkload(t *testing.T) {
	url := os.Getenv("CG_URL")
	if url == "" {
		t.Skip("CG_URL not set")
	}
	var n int
	fmt.Sscan(os.Getenv("CG_N"), &n)
	s, err := redisstore.Dial(url, redisstore.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if os.Getenv("CG_MODE") == "setnx" {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{strings.TrimPrefix(url, "redis://")}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for k := 0; k < n; k += 128 {
			cmds := make(rueidis.Commands, 0, 128)
			for j := k; j < min(n, k+128); j++ {
				cmds = append(cmds, c.B().Set().Key(fmt.Sprint("sluice:z{", os.Getenv("CG_PREFIX"), j, "}:W60000000")).Value("012345678901234567890123").Nx().PxMilliseconds(120000).Build())
			}
			c.DoMulti(context.Background(), cmds...)
		}
		return
	}
	var l sluice.Limiter = s
	var a *edge.Async
	if os.Getenv("CG_MODE") == "first" {
		a, err = edge.NewAsync(s, edge.AsyncOptions{FirstSight: 1, FlushTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		l = a
	}
	var wg sync.WaitGroup
	var next sync.Mutex
	i := 0
	for range 64 {
		wg.Go(func() {
			var d sluice.Decision
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= n {
					return
				}
				c := sluice.Check{Cost: 1, Hits: []sluice.Hit{{Zone: "z", Key: fmt.Sprint(os.Getenv("CG_PREFIX"), k), Limit: sluice.Limit{Rate: 100, Window: time.Minute}}}}
				if err := l.Check(context.Background(), c, &d); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if a != nil {
		if err := a.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", a.Stats())
	}
}
