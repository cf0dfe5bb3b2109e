package openresty

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/workertest"
	"github.com/sluicehq/sluice/redisstore"
)

// goWorkerEnv, when set, makes the test binary a Go process of the mixed
// fleet (TestMixedFleet), through internal/workertest.
const goWorkerEnv = "SLUICE_OPENRESTY_GO_WORKER"

// goJob is what one Go process does: Goroutines callers, each making
// Checks checks of Hit at cost 1 with its own redisstore.Store on the
// Redis at URL.
type goJob struct {
	URL        string
	Hit        sluice.Hit
	Goroutines int
	Checks     int
}

// goResult is what one Go process reports.
type goResult struct {
	Allowed, Denied int
	Errors          []string
}

func TestMain(m *testing.M) {
	workertest.Main(goWorkerEnv, goWork)
	os.Exit(m.Run())
}

// goWork runs a Go process's job once the test lets it go.
func goWork(spec []byte, ready func() error) (any, error) {
	var j goJob
	if err := json.Unmarshal(spec, &j); err != nil {
		return nil, err
	}
	store, err := workertest.Dial(j.URL, redisstore.Options{Timeout: 5 * time.Second}, j.Hit)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if err := ready(); err != nil {
		return nil, err
	}
	var (
		mu sync.Mutex
		r  goResult
		wg sync.WaitGroup
		c  = sluice.Check{Hits: []sluice.Hit{j.Hit}, Cost: 1}
	)
	for range j.Goroutines {
		wg.Go(func() {
			for range j.Checks {
				var d sluice.Decision
				err := store.Check(context.Background(), c, &d)
				mu.Lock()
				switch {
				case err != nil:
					r.Errors = append(r.Errors, err.Error())
				case d.Allowed:
					r.Allowed++
				default:
					r.Denied++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return r, nil
}
