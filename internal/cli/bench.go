package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/loadgen"
)

var benchCommand = command{
	name:    "bench",
	summary: "load-test a server's API, any URL, or a store directly",
	run:     runBench,
}

// benchFlags are the settings of one bench run.
type benchFlags struct {
	server, target, store  string
	zone, limit, algorithm string
	concurrency            int
	duration, timeout      time.Duration
	storeTimeout           time.Duration
	requests               uint64
	keys                   int
	hot                    float64
	cost                   int64
	json                   bool
	// rls holds the flags of the Envoy rate-limit targets.
	rls rlsBenchFlags
	// closeStore releases the store of a -store run; nil otherwise.
	closeStore func() error
}

// benchPrefix starts the keys bench writes to Redis, so that a benchmark
// never touches a server's state (whose prefix is "sluice:").
const benchPrefix = "sluice-bench:"

func parseBenchFlags(env Env, args []string) (*benchFlags, error) {
	f := &benchFlags{}
	fs := newFlagSet(env, "bench", "[-server URL | -url URL | -store memory|REDIS-URL] [flags]")
	fs.StringVar(&f.server, "server", "", "benchmark POST /v1/check on the sluice server at this base URL, such as http://127.0.0.1:8080")
	fs.StringVar(&f.target, "url", "", "benchmark GET requests to this URL (2xx allowed, 429 denied), such as a proxy or a baseline; each {key} in it is replaced by a key, as in http://127.0.0.1:8000/?k={key}")
	fs.StringVar(&f.store, "store", "", `benchmark a store directly, in this process: "memory" (the default without -server or -url) or a Redis URL (redis://, rediss://, redis-sentinel://, redis-cluster://; keys start with "`+benchPrefix+`")`)
	fs.StringVar(&f.zone, "zone", "", "zone to check: with -server, a configured zone (default: the server's demo zone); with -store, a namespace")
	fs.StringVar(&f.limit, "limit", "1000000r/s", "with -store: the limits to check, such as 100r/s or \"10r/s, 1000r/h\"")
	fs.StringVar(&f.algorithm, "algorithm", "", "with -store: sliding-window, buckets, log, decay or gcra (default sliding-window)")
	fs.IntVar(&f.concurrency, "c", 64, "concurrent workers (with -server or -url, one keep-alive connection each)")
	fs.DurationVar(&f.duration, "d", 0, "how long to run (default 10s unless -n is set)")
	fs.Uint64Var(&f.requests, "n", 0, "how many checks to run in total (default: no bound; see -d)")
	fs.IntVar(&f.keys, "keys", 1000, fmt.Sprintf("number of distinct keys, 1 to %d", loadgen.MaxKeys))
	fs.Float64Var(&f.hot, "hot", 0, "share of checks, 0 to 1, that go to one hot key; the rest are spread evenly")
	fs.Int64Var(&f.cost, "cost", 1, "cost of each check")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "with -server or -url: timeout of each request")
	fs.DurationVar(&f.storeTimeout, "store-timeout", 0, "with -store and a Redis URL: timeout of each store call (default 50ms, the store's own)")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON")
	f.rls.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageErrorf(fs, "unexpected argument %q", fs.Arg(0))
	}
	n := 0
	for _, s := range []string{f.server, f.target, f.store, f.rls.grpc, f.rls.json} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return nil, usageErrorf(fs, "-server, -url, -store, -grpc and -rls-json are exclusive: pick one target")
	}
	if n == 0 {
		f.store = "memory"
	}
	if f.concurrency < 1 {
		return nil, usageErrorf(fs, "-c must be >= 1, got %d", f.concurrency)
	}
	if f.duration < 0 || f.timeout <= 0 || f.storeTimeout < 0 {
		return nil, usageErrorf(fs, "-d and -store-timeout must be >= 0 and -timeout > 0")
	}
	return f, nil
}

// usageError is a bad command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(fs *flag.FlagSet, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), msg)
	return &usageError{msg}
}

func runBench(ctx context.Context, env Env, args []string) int {
	f, err := parseBenchFlags(env, args)
	if err != nil {
		return parseExit(err)
	}
	target, newOp, err := f.plan()
	if f.closeStore != nil {
		defer f.closeStore()
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice bench: %v\n", err)
		if errors.Is(err, sluice.ErrInvalid) {
			return 2
		}
		return 1
	}
	opts := loadgen.Options{Concurrency: f.concurrency, Duration: f.duration, Requests: f.requests}
	live := isTerminal(env.Stdout) && !f.json
	if live {
		opts.Progress = func(p loadgen.Progress) { printProgress(env.Stdout, p) }
	}
	rep, err := loadgen.Run(ctx, opts, newOp)
	if live {
		fmt.Fprint(env.Stdout, "\r\033[K")
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice bench: %v\n", err)
		return 1
	}
	res := newBenchResult(target, f, rep)
	if f.json {
		err = res.writeJSON(env.Stdout)
	} else {
		err = res.writeTable(env.Stdout)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice bench: %v\n", err)
		return 1
	}
	if rep.FirstError != nil {
		fmt.Fprintf(env.Stderr, "sluice bench: %d of %d checks failed; first error: %v\n", rep.Errors, rep.Ops, rep.FirstError)
		return 1
	}
	return 0
}

// plan describes the target and returns the factory of each worker's
// operation.
func (f *benchFlags) plan() (string, func(int) (loadgen.Op, error), error) {
	keys, err := loadgen.NewKeys(f.keys, f.hot)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", sluice.ErrInvalid, err)
	}
	switch {
	case f.server != "":
		base, err := parseBaseURL(f.server)
		if err != nil {
			return "", nil, err
		}
		client := loadgen.NewHTTPClient(f.concurrency, f.timeout)
		zone := f.zone
		if zone == "" {
			zone = config.DemoZone
		}
		req := loadgen.HTTPRequest{URL: base + checkPath, Body: checkBody(zone, f.cost)}
		return "POST " + base + checkPath, func(w int) (loadgen.Op, error) {
			return loadgen.HTTPOp(client, req, keys.Picker(w)), nil
		}, nil
	case f.rls.grpc != "" || f.rls.json != "":
		return f.planRLS(keys)
	case f.target != "":
		if _, err := parseBaseURL(f.target); err != nil {
			return "", nil, err
		}
		client := loadgen.NewHTTPClient(f.concurrency, f.timeout)
		req := loadgen.HTTPRequest{URL: f.target}
		return "GET " + f.target, func(w int) (loadgen.Op, error) {
			return loadgen.HTTPOp(client, req, keys.Picker(w)), nil
		}, nil
	}
	return f.planStore(keys)
}

func (f *benchFlags) planStore(keys *loadgen.Keys) (string, func(int) (loadgen.Op, error), error) {
	limits, err := sluice.ParseLimits(f.limit)
	if err != nil {
		return "", nil, err
	}
	algorithm, err := sluice.ParseAlgorithm(f.algorithm)
	if err != nil {
		return "", nil, err
	}
	for i := range limits {
		limits[i].Algorithm = algorithm
	}
	store, closeStore, err := openStore(f.store, benchPrefix, f.storeTimeout)
	if err != nil {
		return "", nil, err
	}
	f.closeStore = closeStore
	probe := sluice.Check{Cost: f.cost}
	for _, l := range limits {
		probe.Hits = append(probe.Hits, sluice.Hit{Zone: f.zone, Key: "k", Limit: l})
	}
	if err := probe.Validate(); err != nil {
		return "", nil, err
	}
	target := fmt.Sprintf("%s store, %s %s", redactURL(f.store), algorithm, strings.ReplaceAll(f.limit, " ", ""))
	return target, func(w int) (loadgen.Op, error) {
		return loadgen.StoreOp(store, f.zone, limits, f.cost, keys.Picker(w)), nil
	}, nil
}

// parseBaseURL checks that s is an absolute http(s) URL and returns it
// without a trailing slash.
func parseBaseURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: %q is not an http:// or https:// URL such as http://127.0.0.1:8080", sluice.ErrInvalid, s)
	}
	return strings.TrimSuffix(s, "/"), nil
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// redactURL drops the credentials of a store URL, for printing: the user
// information and the query (which may hold sentinel_password).
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	rest, _, _ = strings.Cut(rest, "?")
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	return scheme + "://" + rest
}
