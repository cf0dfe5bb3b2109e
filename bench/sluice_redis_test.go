package bench

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// sluiceRedisContenders returns sluice's redisstore once per algorithm,
// connected by URL with default options except Timeout: 3 s, the read
// timeout go-redis gives the peers, so that a slow moment of a shared
// machine is measured as latency rather than failing the run.
func sluiceRedisContenders(srv *redistest.Server) []contenderSpec {
	var specs []contenderSpec
	for _, a := range sluice.Algorithms() {
		name := "sluice-" + string(a)
		specs = append(specs, contenderSpec{name, func(b *testing.B, w workload) contender {
			store, err := redisstore.Dial(srv.URL(), redisstore.Options{Timeout: 3 * time.Second})
			if err != nil {
				b.Fatalf("redisstore: %v", err)
			}
			c := sluiceContender(name, store, w.limit(a))
			c.close = func() { _ = store.Close() }
			return c
		}})
	}
	return specs
}
