package workertest_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/workertest"
)

const env = "SLUICE_WORKERTEST_JOB"

type job struct{ N int }

type result struct {
	Square, PID int
}

func TestMain(m *testing.M) {
	workertest.Main(env, func(spec []byte, ready func() error) (any, error) {
		var j job
		if err := json.Unmarshal(spec, &j); err != nil {
			return nil, err
		}
		if err := ready(); err != nil {
			return nil, err
		}
		return result{Square: j.N * j.N, PID: os.Getpid()}, nil
	})
	os.Exit(m.Run())
}

// Workers are separate processes that each run the job after Go.
func TestWorkers(t *testing.T) {
	ws := workertest.Start(t, env, job{N: 7}, 2)
	pids := map[int]bool{os.Getpid(): true}
	for _, w := range ws {
		if err := w.Go(); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range ws {
		var r result
		if err := w.Result(&r); err != nil {
			t.Fatal(err)
		}
		if r.Square != 49 || pids[r.PID] {
			t.Errorf("worker %d: %+v, want 49 from a process of its own", i, r)
		}
		pids[r.PID] = true
	}
}
