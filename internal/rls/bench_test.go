package rls_test

import (
	"context"
	"strconv"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/rls"
	"github.com/sluicehq/sluice/memstore"
)

// BenchmarkShouldRateLimit is the service alone, without gRPC: two
// descriptors per request on the memory store, in parallel.
func BenchmarkShouldRateLimit(b *testing.B) {
	rules, err := rls.Parse(map[string][]byte{"bench.yaml": []byte("domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n  - key: api_key\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n")})
	if err != nil {
		b.Fatal(err)
	}
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := rls.New(rules, rls.Options{Limiter: func(config.FailurePolicy) sluice.Limiter { return ms }})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb_ *testing.PB) {
		i := 0
		for pb_.Next() {
			key := strconv.Itoa(i % 1000)
			i++
			req := &pb.RateLimitRequest{Domain: "bench", Descriptors: []*pbDesc{desc("user", key), desc("api_key", key)}}
			resp, err := svc.ShouldRateLimit(context.Background(), req)
			if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
				b.Fatal(resp, err)
			}
		}
	})
}
