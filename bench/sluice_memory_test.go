package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// sluiceMemoryContenders returns sluice's memstore once per algorithm,
// default options: what a user gets from memstore.New(memstore.Options{}).
func sluiceMemoryContenders() []contenderSpec {
	var specs []contenderSpec
	for _, a := range sluice.Algorithms() {
		specs = append(specs, contenderSpec{"sluice-" + string(a), func(b *testing.B, w workload) contender {
			store, err := memstore.New(memstore.Options{})
			if err != nil {
				b.Fatalf("memstore: %v", err)
			}
			return sluiceContender("sluice-"+string(a), store, w.limit(a))
		}})
	}
	return specs
}

// sluiceContender checks one hit of cost 1 on l per call. Each caller
// reuses its own hit slice and Decision, as a server handler would, in
// cache lines of their own: both are written on every check, and two
// callers' objects (96 and 48 bytes, allocated in turn) sharing a line
// would move it between the cores on every check of either, charging
// the callers' cost to whichever contender the allocator laid out so.
// The other contenders' callers write no memory of their own.
func sluiceContender(name string, l sluice.Limiter, lim sluice.Limit) contender {
	return contender{name: name, caller: func() decideFunc {
		own := new(struct {
			_    [64]byte
			hits [1]sluice.Hit
			d    sluice.Decision
			_    [64]byte
		})
		own.hits[0].Limit = lim
		hits, d := own.hits[:], &own.d
		return func(ctx context.Context, key string) (bool, error) {
			hits[0].Key = key
			if err := l.Check(ctx, sluice.Check{Hits: hits, Cost: 1}, d); err != nil {
				return false, fmt.Errorf("%s: %w", name, err)
			}
			return d.Allowed, nil
		}
	}}
}
