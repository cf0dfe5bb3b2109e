package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/wire"
	"github.com/sluicehq/sluice/redisstore"
)

// The server's decision API (internal/server, internal/wire).
const (
	checkPath = wire.CheckPath
	resetPath = wire.ResetPath
)

// defaultServer is where "sluice serve" listens without flags.
const defaultServer = "http://127.0.0.1:8080"

// exitDenied is the exit code of a check that was denied, so scripts can
// tell a denial (3) from an error (1).
const exitDenied = 3

var checkCommand = command{
	name:    "check",
	summary: "ask a running server whether keys may spend a cost now",
	run:     runCheck,
}

// apiFlags are the flags check and reset share.
type apiFlags struct {
	server  string
	zone    string
	timeout time.Duration
	json    bool
	keys    []string
	// token is the admin token sent as a bearer token
	// ($SLUICE_ADMIN_TOKEN); empty sends none.
	token string
	// serverEnv is $SLUICE_SERVER, the default of -server.
	serverEnv string
	// Direct use of Redis, without a server.
	redis, prefix, limit, algorithm string
}

func (f *apiFlags) register(env Env, fs *flag.FlagSet) {
	// The default is resolved in parse, so that -h prints it once.
	fs.StringVar(&f.server, "server", "", "base `URL` of the sluice server (default $SLUICE_SERVER, else "+defaultServer+")")
	f.token = env.Getenv("SLUICE_ADMIN_TOKEN")
	f.serverEnv = env.Getenv("SLUICE_SERVER")
	fs.StringVar(&f.zone, "zone", config.DemoZone, "zone to use")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "timeout of the request")
	fs.BoolVar(&f.json, "json", false, "print the answer as JSON (the server's JSON with -server)")
	fs.StringVar(&f.redis, "redis", "", "use Redis directly instead of a server: a redis://, rediss://, redis-sentinel:// or redis-cluster:// `URL`; needs -limit")
	fs.StringVar(&f.prefix, "prefix", redisstore.DefaultPrefix, "with -redis: the key prefix (the server's store.prefix)")
	fs.StringVar(&f.limit, "limit", "", "with -redis: the zone's limits, such as \"10r/s, 1000r/h\"")
	fs.StringVar(&f.algorithm, "algorithm", "", "with -redis: the zone's algorithm (default sliding-window)")
}

// parse parses args, checks them and returns the server's base URL (empty
// with -redis). A bad command line has been reported on fs.
func (f *apiFlags) parse(fs *flag.FlagSet, args []string) (string, error) {
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if f.keys = fs.Args(); len(f.keys) == 0 {
		return "", usageErrorf(fs, "give at least one key")
	}
	explicit := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { explicit[fl.Name] = true })
	if f.redis != "" {
		switch {
		case explicit["server"]:
			return "", usageErrorf(fs, "-server and -redis are exclusive")
		case f.limit == "":
			return "", usageErrorf(fs, "-redis needs -limit: the zone's limits, such as 10r/m")
		}
		return "", nil
	}
	for _, name := range []string{"limit", "algorithm", "prefix"} {
		if explicit[name] {
			return "", usageErrorf(fs, "-%s applies only with -redis", name)
		}
	}
	f.server = cmp.Or(f.server, f.serverEnv, defaultServer)
	base, err := parseBaseURL(f.server)
	if err != nil {
		return "", usageErrorf(fs, "-server: %v", err)
	}
	return base, nil
}

func runCheck(ctx context.Context, env Env, args []string) int {
	var f apiFlags
	var cost int64
	fs := newFlagSet(env, "check", "[flags] KEY...")
	f.register(env, fs)
	fs.Int64Var(&cost, "cost", 1, "cost to spend; 0 only reports the state")
	base, err := f.parse(fs, args)
	if err != nil {
		return parseExit(err)
	}
	var d *apiDecision
	var raw []byte
	if f.redis != "" {
		d, err = f.checkRedis(ctx, cost)
	} else {
		d, raw, err = checkServer(ctx, base, f, cost)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice check: %v\n", err)
		if errors.Is(err, sluice.ErrInvalid) {
			return 2
		}
		return 1
	}
	switch {
	case f.json && raw != nil:
		env.Stdout.Write(raw)
	case f.json:
		json.NewEncoder(env.Stdout).Encode(d)
	default:
		printDecision(env.Stdout, d)
	}
	if !d.Allowed {
		return exitDenied
	}
	return 0
}

// checkServer asks the server, and returns its decision and its JSON.
func checkServer(ctx context.Context, base string, f apiFlags, cost int64) (*apiDecision, []byte, error) {
	_, raw, err := post(ctx, base+checkPath, f.timeout, f.token, apiRequest{Zone: f.zone, Keys: f.keys, Cost: &cost})
	if err != nil {
		return nil, nil, err
	}
	var d apiDecision
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, nil, fmt.Errorf("%s: unreadable answer: %v", base+checkPath, err)
	}
	return &d, raw, nil
}

// checkRedis decides the check on Redis directly.
func (f *apiFlags) checkRedis(ctx context.Context, cost int64) (*apiDecision, error) {
	limits, err := directLimits(f.limit, f.algorithm)
	if err != nil {
		return nil, err
	}
	store, closeStore, err := openStore(f.redis, f.prefix, f.timeout)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	c := directCheck(f.zone, f.keys, limits, cost)
	var d sluice.Decision
	if err := store.Check(ctx, c, &d); err != nil {
		return nil, err
	}
	return decisionView(f.zone, c, &d), nil
}

// The bodies of the decision API, as internal/wire defines them for the
// server, the CLI and the tests.
type (
	apiRequest  = wire.Request
	apiDecision = wire.Response
	apiHit      = wire.Limit
)

// printDecision writes d for a person: the verdict, then a table of the
// limits.
func printDecision(w io.Writer, d *apiDecision) {
	verdict := "allowed"
	if !d.Allowed {
		verdict = "denied: retry after " + seconds(d.RetryAfter)
	}
	note := ""
	if d.Shadowed {
		note = "; a shadow limit would have denied"
	}
	fmt.Fprintf(w, "%s (zone %s, decided by the %s%s)\n", verdict, d.Zone, d.Source, note)
	if len(d.Limits) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nkey\tlimit\talgorithm\tused\tremaining\tretry after\treset after")
	for _, h := range d.Limits {
		name := h.Limit
		if h.Name != h.Limit {
			name = h.Name + " (" + h.Limit + ")"
		}
		if h.Shadow {
			name += " shadow"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", h.Key, name, h.Algorithm,
			strconv.FormatFloat(h.Used, 'f', -1, 64), h.Remaining, seconds(h.RetryAfter), seconds(h.ResetAfter))
	}
	tw.Flush()
}

// seconds formats a wait given in seconds, such as 0.714 as "714ms".
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// post sends body as JSON to url, with token as a bearer token unless it
// is empty, and returns the status and the body of a
// 2xx or 429 answer. Any other answer is an error quoting the server's
// problem detail.
func post(ctx context.Context, url string, timeout time.Duration, token string, body any) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	data, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: reading the answer: %w", url, err)
	}
	if res.StatusCode/100 == 2 || res.StatusCode == http.StatusTooManyRequests {
		return res.StatusCode, raw, nil
	}
	return 0, nil, fmt.Errorf("%s: %s", url, problemText(res.Status, raw))
}

// problemText renders an error answer: the problem's title and detail
// when it is problem+json, else the start of the body.
func problemText(status string, raw []byte) string {
	var p struct{ Title, Detail string }
	if err := json.Unmarshal(raw, &p); err == nil && (p.Title != "" || p.Detail != "") {
		return strings.TrimSuffix(status+": "+p.Title+": "+p.Detail, ": ")
	}
	body := strings.TrimSpace(string(raw))
	if len(body) > 200 {
		body = body[:200] + "..."
	}
	if body == "" {
		return status
	}
	return status + ": " + body
}

// checkBody returns a builder of the JSON body of POST /v1/check for one
// key, for the load generator: no allocation beyond dst.
func checkBody(zone string, cost int64) func(dst []byte, key string) []byte {
	return func(dst []byte, key string) []byte {
		return wire.AppendRequest(dst, zone, key, cost)
	}
}
