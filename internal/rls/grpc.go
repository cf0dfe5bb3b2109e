package rls

import (
	"context"
	"net"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// ServiceName is the full name of Envoy's rate-limit gRPC service, as the
// health service reports it.
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// GRPCServer serves a Service over gRPC, with the gRPC health service
// (SERVING for "" and ServiceName until shutdown) and server reflection.
type GRPCServer struct {
	srv    *grpc.Server
	health *health.Server
}

// NewGRPCServer returns a gRPC server of s. maxRecv bounds the size of a
// request message in bytes; zero means gRPC's default (4 MiB). opts are
// added to the server's options, such as its transport credentials (TLS).
func (s *Service) NewGRPCServer(maxRecv int, opts ...grpc.ServerOption) *GRPCServer {
	if maxRecv > 0 {
		opts = append(opts, grpc.MaxRecvMsgSize(maxRecv))
	}
	g := &GRPCServer{srv: grpc.NewServer(opts...), health: health.NewServer()}
	pb.RegisterRateLimitServiceServer(g.srv, grpcService{s: s})
	g.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	g.health.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g.srv, g.health)
	reflection.Register(g.srv)
	return g
}

// Serve accepts connections on ln until Shutdown or Close. It returns nil
// after either.
func (g *GRPCServer) Serve(ln net.Listener) error { return g.srv.Serve(ln) }

// Shutdown reports NOT_SERVING, stops accepting and waits for in-flight
// RPCs until ctx ends; then it closes every connection and returns
// ctx's error.
func (g *GRPCServer) Shutdown(ctx context.Context) error {
	g.health.Shutdown()
	done := make(chan struct{})
	go func() {
		g.srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		g.srv.Stop()
		<-done
		return ctx.Err()
	}
}

// SetServing sets the health status of "" and ServiceName to SERVING or
// NOT_SERVING, such as NOT_SERVING while the store is not ready yet.
// After Shutdown the status stays NOT_SERVING.
func (g *GRPCServer) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	g.health.SetServingStatus("", st)
	g.health.SetServingStatus(ServiceName, st)
}

// Close closes every connection at once.
func (g *GRPCServer) Close() error {
	g.srv.Stop()
	return nil
}

// grpcService adapts Service to the generated server interface.
type grpcService struct {
	pb.UnimplementedRateLimitServiceServer
	s *Service
}

func (g grpcService) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	return g.s.ShouldRateLimit(ctx, req)
}
