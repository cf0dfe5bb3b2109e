package rls

import (
	"context"
	"fmt"
	"strconv"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The load "sluice bench -grpc" and "-rls-json" send: two descriptors per
// request, (user, <key>) and (api_key, <key>), in one domain. The rule
// file examples/envoy/config/bench.yaml limits both, and reads the same
// in sluice and in envoyproxy/ratelimit.
const (
	benchUserKey   = "user"
	benchAPIKeyKey = "api_key"
)

// BenchClient sends ShouldRateLimit requests over one gRPC connection
// (HTTP/2 multiplexes concurrent calls as streams). Safe for concurrent
// use.
type BenchClient struct {
	conn   *grpc.ClientConn
	client pb.RateLimitServiceClient
}

// DialBench connects, without TLS, to the rate-limit service at addr
// (host:port).
func DialBench(addr string) (*BenchClient, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("rls: dial %s: %w", addr, err)
	}
	return &BenchClient{conn: conn, client: pb.NewRateLimitServiceClient(conn)}, nil
}

// Close closes the connection.
func (b *BenchClient) Close() error { return b.conn.Close() }

// Call sends the bench request for key in domain and reports whether the
// answer was OVER_LIMIT.
func (b *BenchClient) Call(ctx context.Context, domain, key string) (overLimit bool, err error) {
	req := &pb.RateLimitRequest{Domain: domain, Descriptors: []*rlv3.RateLimitDescriptor{
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: benchUserKey, Value: key}}},
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: benchAPIKeyKey, Value: key}}},
	}}
	resp, err := b.client.ShouldRateLimit(ctx, req)
	if err != nil {
		return false, err
	}
	return resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT, nil
}

// AppendBenchJSON appends the bench request for key in domain as the JSON
// body of POST /json.
func AppendBenchJSON(dst []byte, domain, key string) []byte {
	dst = append(dst, `{"domain":`...)
	dst = strconv.AppendQuote(dst, domain)
	for i, k := range []string{benchUserKey, benchAPIKeyKey} {
		if i == 0 {
			dst = append(dst, `,"descriptors":[`...)
		} else {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"entries":[{"key":"`+k+`","value":`...)
		dst = strconv.AppendQuote(dst, key)
		dst = append(dst, `}]}`...)
	}
	return append(dst, "]}"...)
}
