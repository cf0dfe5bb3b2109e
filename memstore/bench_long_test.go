package memstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// BenchmarkCheckLongKey measures a sliding-window check on a key that
// already has state, for keys whose zone and key together are kept whole
// (40 bytes) or as their SHA-256 digest (100 and 1,000 bytes): what the
// digest costs per check.
//
//	go test -run '^$' -bench BenchmarkCheckLongKey ./memstore
func BenchmarkCheckLongKey(b *testing.B) {
	for _, n := range []int{40, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			const keys = 1024
			l := sluice.Limit{Rate: 1e9, Window: time.Minute}
			ks := make([]string, keys)
			for i := range ks {
				ks[i] = fmt.Sprintf("%08d", i) + strings.Repeat("k", n-len("api")-8)
			}
			s, err := New(Options{})
			if err != nil {
				b.Fatal(err)
			}
			var d sluice.Decision
			ctx := context.Background()
			for _, k := range ks {
				if err := s.Check(ctx, sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: k, Limit: l}}, Cost: 1}, &d); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c := sluice.Check{Hits: []sluice.Hit{{Zone: "api", Key: ks[i%keys], Limit: l}}, Cost: 1}
				if err := s.Check(ctx, c, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
