package memstore

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) sluice.Limiter {
		return newStore(t, Options{Now: now})
	})
}

// TestConformanceTinyStore runs the suite on a store with one shard of 64
// keys, so that the paths that sweep and evict run under the same checks.
func TestConformanceTinyStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) sluice.Limiter {
		return newStore(t, Options{Now: now, MaxKeys: 64, Shards: 1})
	})
}
