package openresty

import (
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/workertest"
)

// goWorkerEnv, when set, makes the test binary a Go process of the mixed
// fleet (TestMixedFleet): it runs a workertest.Job with a
// redisstore.Store of its own.
const goWorkerEnv = "SLUICE_OPENRESTY_GO_WORKER"

func TestMain(m *testing.M) {
	workertest.Main(goWorkerEnv, workertest.Work)
	os.Exit(m.Run())
}
