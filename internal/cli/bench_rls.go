package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/sluicehq/sluice/internal/loadgen"
	"github.com/sluicehq/sluice/internal/rls"
)

// rlsBenchFlags are the Envoy rate-limit targets of "sluice bench": the
// gRPC ShouldRateLimit and envoyproxy/ratelimit's POST /json, each asked
// for two descriptors per request (see examples/envoy/config/bench.yaml).
type rlsBenchFlags struct {
	grpc, json, domain string
}

func (f *rlsBenchFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.grpc, "grpc", "", "benchmark Envoy's ShouldRateLimit at this `host:port` (sluice serve's grpc listener, or envoyproxy/ratelimit), two descriptors per request, every worker a stream on one connection")
	fs.StringVar(&f.json, "rls-json", "", "benchmark envoyproxy/ratelimit's POST /json at this `URL`, such as http://127.0.0.1:8080/json, with the request of -grpc")
	fs.StringVar(&f.domain, "domain", "bench", "with -grpc or -rls-json: the rate-limit domain (examples/envoy/config/bench.yaml defines bench)")
}

// planRLS plans a -grpc or -rls-json run.
func (f *benchFlags) planRLS(keys *loadgen.Keys) (string, func(int) (loadgen.Op, error), error) {
	domain := f.rls.domain
	if f.rls.json != "" {
		if _, err := parseBaseURL(f.rls.json); err != nil {
			return "", nil, err
		}
		client := loadgen.NewHTTPClient(f.concurrency, f.timeout)
		req := loadgen.HTTPRequest{URL: f.rls.json, Body: func(dst []byte, key string) []byte { return rls.AppendBenchJSON(dst, domain, key) }}
		return "POST " + f.rls.json + " (domain " + domain + ", 2 descriptors)", func(w int) (loadgen.Op, error) {
			return loadgen.HTTPOp(client, req, keys.Picker(w)), nil
		}, nil
	}
	client, err := rls.DialBench(f.rls.grpc)
	if err != nil {
		return "", nil, err
	}
	f.closeStore = client.Close
	return fmt.Sprintf("gRPC ShouldRateLimit %s (domain %s, 2 descriptors)", f.rls.grpc, domain), func(w int) (loadgen.Op, error) {
		pick := keys.Picker(w)
		return func(run context.Context, _ uint64) (loadgen.Result, error) {
			// Not the run's deadline: gRPC sends it to the server, which then
			// fails calls that could not finish before the run ends.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(run), f.timeout)
			defer cancel()
			over, err := client.Call(ctx, domain, pick())
			switch {
			case err != nil && run.Err() != nil:
				return loadgen.Failed, run.Err() // the end of the run, not a failure
			case err != nil:
				return loadgen.Failed, err
			case over:
				return loadgen.Denied, nil
			}
			return loadgen.Allowed, nil
		}, nil
	}, nil
}
