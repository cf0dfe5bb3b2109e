package bench

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// sluiceRedisContenders returns sluice's redisstore once per algorithm,
// connected by URL with default options: the 50 ms Timeout included,
// which bounds a call from when it is sent, so a saturated but healthy
// Redis causes no errors (the errors metric counts any).
func sluiceRedisContenders(srv *redistest.Server) []contenderSpec {
	var specs []contenderSpec
	for _, a := range sluice.Algorithms() {
		name := "sluice-" + string(a)
		specs = append(specs, contenderSpec{name, func(b *testing.B, w workload) contender {
			store, err := redisstore.Dial(srv.URL(), redisstore.Options{})
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
