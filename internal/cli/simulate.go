package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/algo"
	"github.com/sluicehq/sluice/internal/sim"
)

// simulateCommand measures every algorithm against the exact sliding log on
// a generated trace (see package internal/sim and docs/accuracy.md).
var simulateCommand = command{
	name:    "simulate",
	summary: "measure each algorithm's accuracy against the exact log on a seeded trace",
	run:     runSimulate,
}

// simulateFlags are the command's flags, parsed and validated.
type simulateFlags struct {
	seed       uint64
	profile    string
	requests   int64
	sources    int
	duration   time.Duration
	limit      sluice.Limit
	resolution time.Duration
	algorithms []string
	enforce    bool
	plot       string
	json       bool
	classes    bool
	async      sim.AsyncOptions // Processes 0: no async fleet
	asyncEvery time.Duration
	asyncLag   time.Duration
	workers    int
}

func parseSimulate(env Env, args []string) (simulateFlags, error) {
	fs := newFlagSet(env, "simulate", "[flags]")
	var f simulateFlags
	var limit, algorithms, mode string
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the generated trace: the same seed gives the same trace")
	fs.StringVar(&f.profile, "profile", sim.Harsh, "traffic profile of the trace: harsh (55% of requests near or over the limit) or cloudflare (most sources far below it)")
	fs.Int64Var(&f.requests, "requests", 1_000_000, "total requests in the trace")
	fs.IntVar(&f.sources, "sources", 10_000, "number of sources (keys) in the trace")
	fs.DurationVar(&f.duration, "duration", time.Hour, "time span of the trace")
	fs.StringVar(&limit, "limit", "100r/m", "the limit every source is held to, as a spec string")
	fs.DurationVar(&f.resolution, "resolution", 0, "bucket length of the buckets algorithm (0: a tenth of the window)")
	fs.StringVar(&algorithms, "algorithms", strings.Join(sim.Algorithms(), ","), "comma-separated algorithms to compare with the exact log")
	fs.StringVar(&mode, "mode", "shadow", "shadow (every request recorded, Cloudflare's method) or enforce (limited requests not recorded)")
	fs.StringVar(&f.plot, "plot", "", "write an SVG plot of estimated vs real rate for representative sources to this file (replaced if it exists)")
	fs.BoolVar(&f.json, "json", false, "print the report as JSON instead of a table")
	fs.BoolVar(&f.classes, "classes", false, "also print the results by traffic class (steady under/over, bursty, background)")
	fs.IntVar(&f.workers, "workers", 0, "goroutines replaying sources (0: one per core)")
	fs.IntVar(&f.async.Processes, "async-processes", 0, "with -mode enforce, also replay a fleet of this many async-mode processes (edge.Async) and report its worst window (0: none)")
	fs.IntVar(&f.async.Share, "async-share", 0, "the fleet's edge.AsyncOptions.Processes: each process spends at most 1/share of what remained (0: the fleet's size)")
	fs.DurationVar(&f.asyncEvery, "async-interval", 100*time.Millisecond, "the fleet's sync interval")
	fs.DurationVar(&f.asyncLag, "async-latency", time.Millisecond, "the time from a flush to the store's answer")
	fs.Int64Var(&f.async.FirstSight, "async-first-sight", 0, "the fleet's edge.AsyncOptions.FirstSight: requests a process admits locally on a source it has no view of (0: its first request asks the store)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	l, err := sluice.ParseLimit(limit)
	if err != nil {
		return f, err
	}
	l.Algorithm, l.Resolution = sluice.Buckets, f.resolution
	if err := l.Validate(); err != nil {
		return f, err
	}
	f.limit = l
	for _, a := range strings.Split(algorithms, ",") {
		a = strings.TrimSpace(a)
		if _, err := sluice.ParseAlgorithm(a); err != nil || a == "" {
			return f, fmt.Errorf("-algorithms %q: unknown algorithm %q (want a comma-separated list of %s)",
				algorithms, a, strings.Join(sim.Algorithms(), ", "))
		}
		f.algorithms = append(f.algorithms, a)
	}
	switch {
	case f.async.Processes < 0 || f.async.Share < 0 || f.async.FirstSight < 0:
		return f, fmt.Errorf("-async-processes, -async-share and -async-first-sight must be >= 0")
	case f.async.Processes > 0 && mode != "enforce":
		return f, fmt.Errorf("-async-processes needs -mode enforce: the worst window is an enforcing figure")
	case f.async.Processes > 0 && (f.asyncEvery < time.Microsecond || f.asyncLag < 0):
		return f, fmt.Errorf("-async-interval must be >= 1µs and -async-latency >= 0")
	}
	if f.async.Share == 0 {
		f.async.Share = f.async.Processes
	}
	f.async.Interval, f.async.Latency = f.asyncEvery.Microseconds(), f.asyncLag.Microseconds()
	if !slices.Contains(sim.Profiles(), f.profile) {
		return f, fmt.Errorf("-profile %q: want %s", f.profile, strings.Join(sim.Profiles(), " or "))
	}
	switch mode {
	case "shadow":
	case "enforce":
		f.enforce = true
	default:
		return f, fmt.Errorf("-mode %q: want shadow or enforce", mode)
	}
	return f, nil
}

func runSimulate(ctx context.Context, env Env, args []string) int {
	f, err := parseSimulate(env, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice simulate: %v\n", err)
		return 2
	}
	if err := simulate(ctx, env, f); err != nil {
		fmt.Fprintf(env.Stderr, "sluice simulate: %v\n", err)
		return 1
	}
	return 0
}

func simulate(ctx context.Context, env Env, f simulateFlags) error {
	p := algo.Params{Rate: f.limit.Rate, Window: f.limit.Window.Microseconds(), Bucket: f.limit.Bucket().Microseconds()}
	tr, err := sim.NewTrace(sim.TraceOptions{Seed: f.seed, Requests: f.requests, Sources: f.sources,
		Duration: f.duration.Microseconds(), Rate: p.Rate, Window: p.Window, Profile: f.profile})
	if err != nil {
		return err
	}
	rep := tr.Representative()
	watch := []int{rep[sim.SteadyUnder], rep[sim.SteadyOver], rep[sim.Bursty]}
	if f.plot == "" {
		watch = nil
	}
	began := time.Now()
	report, err := sim.Run(ctx, tr, p, sim.Options{Algorithms: f.algorithms, Enforce: f.enforce, Workers: f.workers, Watch: watch})
	if err != nil {
		return err
	}
	var fleet *sim.AsyncReport
	if f.async.Processes > 0 {
		r, err := sim.RunAsync(ctx, tr, p, f.async)
		if err != nil {
			return err
		}
		fleet = &r
		report.Fleet = &sim.FleetRow{Name: fmt.Sprintf("async %dx", f.async.Processes), AsyncReport: r}
	}
	elapsed := time.Since(began)
	if f.plot != "" {
		if err := writePlot(f.plot, tr, report, p, f.algorithms); err != nil {
			return err
		}
	}
	if f.json {
		return writeSimulateJSON(env, f, report, fleet, elapsed)
	}
	fmt.Fprintf(env.Stdout, "%d requests from %d sources over %v, %s profile, limit %s, seed %d, %s mode, %v\n",
		report.Requests, report.Sources, f.duration, f.profile, f.limit, f.seed, report.Mode, elapsed.Round(time.Millisecond))
	if w := report.Results[0].WorstWindow; w != nil {
		fmt.Fprintf(env.Stdout, "each algorithm against the exact count of the requests it admitted; %d sources offer more than the limit in some window\n", w.Sources)
	} else if r0 := report.Results[0]; r0.Model == "exact window" {
		fmt.Fprintf(env.Stdout, "exact log: %.3f%% of requests over the limit; %d sources over it at some point\n",
			100*float64(r0.ExactLimited)/float64(max(1, report.Requests)), r0.SourcesOver)
	}
	if !f.enforce && slices.Contains(f.algorithms, "gcra") {
		fmt.Fprintln(env.Stdout, "gcra records only what it allows, as a GCRA does, and is compared with the exact count of that")
	}
	fmt.Fprintln(env.Stdout)
	if err := report.WriteTable(env.Stdout); err != nil {
		return err
	}
	if fleet != nil {
		fmt.Fprintf(env.Stdout, "\nasync %dx: async mode, %d processes (share %d, sync interval %v, flush latency %v, first sight %d) over an exact store: worst window %.3f L mean, %.3f L max over %d sources; %d false denials (%.4f%% of requests)\n",
			f.async.Processes, f.async.Processes, f.async.Share, f.asyncEvery, f.asyncLag, f.async.FirstSight, fleet.Mean, fleet.Max, fleet.Sources,
			fleet.FalseDenials, 100*float64(fleet.FalseDenials)/float64(max(1, fleet.Requests)))
	}
	if !f.classes {
		return nil
	}
	fmt.Fprintln(env.Stdout)
	return report.WriteClassTable(env.Stdout)
}

func writeSimulateJSON(env Env, f simulateFlags, report *sim.Report, fleet *sim.AsyncReport, elapsed time.Duration) error {
	type async struct {
		Processes int     `json:"processes"`
		Share     int     `json:"share"`
		Interval  string  `json:"sync_interval"`
		Latency   string  `json:"flush_latency"`
		Sources   int     `json:"sources"`
		Mean      float64 `json:"worst_window_mean"`
		Max       float64 `json:"worst_window_max"`
		First     int64   `json:"first_sight"`
		False     int64   `json:"false_denials"`
		Requests  int64   `json:"requests"`
	}
	out := struct {
		Seed       uint64  `json:"seed"`
		Profile    string  `json:"profile"`
		Limit      string  `json:"limit"`
		Duration   string  `json:"duration"`
		Resolution string  `json:"resolution"`
		Elapsed    float64 `json:"elapsed_seconds"`
		Async      *async  `json:"async,omitempty"`
		*sim.Report
	}{f.seed, f.profile, f.limit.String(), f.duration.String(), f.limit.Bucket().String(), elapsed.Seconds(), nil, report}
	if fleet != nil {
		out.Async = &async{f.async.Processes, f.async.Share, f.asyncEvery.String(), f.asyncLag.String(), fleet.Sources, fleet.Mean, fleet.Max,
			f.async.FirstSight, fleet.FalseDenials, fleet.Requests}
	}
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// writePlot draws the watched sources (steady under, steady over, bursty):
// the steady ones from just before their first request over six windows,
// where the estimates ramp up, the bursty one over three windows around its
// highest real rate.
func writePlot(path string, tr *sim.Trace, report *sim.Report, p algo.Params, names []string) error {
	var panels []sim.Panel
	for _, s := range report.Series {
		if len(s.Points) == 0 {
			continue
		}
		pn := sim.Panel{Series: s, From: s.Points[0].At - p.Window/2, To: s.Points[0].At + 6*p.Window}
		switch c := tr.Class(s.Source); c {
		case sim.SteadyUnder, sim.SteadyOver:
			pn.Title = fmt.Sprintf("source %d: %s, a steady %.0f%% of the limit", s.Source, c, 100*tr.Factor(s.Source))
		default:
			peak := s.Points[0]
			for _, pt := range s.Points {
				if pt.Real > peak.Real {
					peak = pt
				}
			}
			first := peak.At // the burst's first request still in the window at its peak
			for _, pt := range s.Points {
				if pt.At > peak.At-p.Window && pt.Real > 0 {
					first = pt.At
					break
				}
			}
			pn.From, pn.To = first-p.Window/4, first+11*p.Window/4
			pn.Title = fmt.Sprintf("source %d: %s, %d requests in bursts; its highest burst", s.Source, c, tr.Size(s.Source))
		}
		panels = append(panels, pn)
	}
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := sim.WritePlot(fh, p, names, panels); err != nil {
		fh.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return fh.Close()
}
