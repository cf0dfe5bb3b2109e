package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/benchcpu"
	"github.com/sluicehq/sluice/internal/tracing"
)

// nopCollector is an OTLP trace receiver that drops what it gets.
type nopCollector struct {
	collectorpb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans int
}

func (c *nopCollector) Export(ctx context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans += len(ss.Spans)
		}
	}
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// processCPU is the CPU time the whole process has used: the handlers,
// and the exporter's and collector's goroutines.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTracingRatio measures what tracing at 1% sampling costs POST
// /v1/check (BenchmarkCheckHandler's requests, without traceparent, on
// one memory store) as a ratio a busy machine disturbs little: 41
// rounds, each sending 10,000 requests per goroutine (GOMAXPROCS
// goroutines) through the API handler of a server without a Tracer and
// of one with a Tracer (OTEL_TRACES_SAMPLER=traceidratio, argument 0.01)
// exporting over OTLP gRPC to a collector in this process, in
// alternating order; and, as "off", two servers without. CPU is the whole process's (getrusage), so it
// includes the batch exporter and the collector. It reports the median
// and 10th and 90th percentiles of the ratio of requests per CPU-second
// with tracing to those without, and the CPU ns per request of each:
//
//	go test -run '^$' -bench BenchmarkTracingRatio -benchtime 1x ./internal/server
func BenchmarkTracingRatio(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	col := &nopCollector{}
	gs := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(gs, col)
	go gs.Serve(ln)
	defer gs.Stop()
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	b.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
	b.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.01")
	tr, err := tracing.New(b.Context(), "bench", os.Getenv)
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := parseConfigBytes("zones: [{name: z, limits: 1000000000r/s}]\n")
	if err != nil {
		b.Fatal(err)
	}
	// One store for all: two stores hash keys with different seeds, which
	// alone moves a check's cost by a few percent.
	store, err := OpenStore(cfg.Store, nil)
	if err != nil {
		b.Fatal(err)
	}
	handler := func(tr *tracing.Tracer) http.Handler {
		s, err := New(b.Context(), cfg, Options{Store: store, Tracer: tr})
		if err != nil {
			b.Fatal(err)
		}
		return limitBody(s.apiHandler("api"), cfg.Listeners[0].MaxBodyBytes)
	}
	bodies := make([]string, 1000)
	for i := range bodies {
		bodies[i] = `{"zone":"z","key":"bench-` + strconv.Itoa(i) + `"}`
	}
	const perRound, rounds = 10_000, 41
	workers := runtime.GOMAXPROCS(0)
	run := func(h http.Handler) func() time.Duration {
		return func() time.Duration {
			start := processCPU()
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range perRound {
						rec := httptest.NewRecorder()
						req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(bodies[(w*7919+i)%len(bodies)]))
						req.Header.Set("Content-Type", "application/json")
						h.ServeHTTP(rec, req)
						if rec.Code != http.StatusOK {
							b.Errorf("status %d: %s", rec.Code, rec.Body)
							return
						}
					}
				})
			}
			wg.Wait()
			return processCPU() - start
		}
	}
	// "off" compares two servers without tracing: the floor of what the
	// machine lets this benchmark see. "1pct" compares one without and one
	// with.
	for _, bb := range []struct {
		name string
		on   http.Handler
	}{{"off", handler(nil)}, {"1pct", handler(tr)}} {
		b.Run(bb.name, func(b *testing.B) {
			off := handler(nil)
			var r benchcpu.Ratio
			for b.Loop() {
				r = benchcpu.Interleave(rounds, run(off), run(bb.on))
			}
			r.Report(b, "request", perRound*workers)
			if bb.name == "1pct" {
				if err := tr.ForceFlush(b.Context()); err != nil {
					b.Fatal(err)
				}
				col.mu.Lock()
				b.ReportMetric(float64(col.spans)/float64((rounds+1)*perRound*workers), "exported/request")
				col.mu.Unlock()
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
}
