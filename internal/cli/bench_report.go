package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/loadgen"
)

// benchResult is what bench prints, as a table or as JSON.
type benchResult struct {
	Target      string       `json:"target"`
	Concurrency int          `json:"concurrency"`
	Keys        int          `json:"keys"`
	Hot         float64      `json:"hot"`
	Seconds     float64      `json:"elapsed_s"`
	Checks      uint64       `json:"decisions"`
	Allowed     uint64       `json:"allowed"`
	Denied      uint64       `json:"denied"`
	Errors      uint64       `json:"errors"`
	PerSecond   float64      `json:"decisions_per_s"`
	Latency     benchLatency `json:"latency_us"`
	FirstError  string       `json:"first_error,omitempty"`
}

// benchLatency holds latency percentiles in microseconds.
type benchLatency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99.9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func newBenchResult(target string, f *benchFlags, r *loadgen.Report) benchResult {
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	res := benchResult{
		Target: target, Concurrency: r.Concurrency, Keys: f.keys, Hot: f.hot,
		Seconds: r.Elapsed.Seconds(), Checks: r.Ops, Allowed: r.Allowed, Denied: r.Denied,
		Errors: r.Errors, PerSecond: r.Rate(),
		Latency: benchLatency{
			P50: us(r.Latency.Quantile(0.5)), P90: us(r.Latency.Quantile(0.9)),
			P99: us(r.Latency.Quantile(0.99)), P999: us(r.Latency.Quantile(0.999)),
			Max: us(r.Latency.Max()), Mean: us(r.Latency.Mean()),
		},
	}
	if r.FirstError != nil {
		res.FirstError = r.FirstError.Error()
	}
	return res
}

func (r benchResult) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r benchResult) writeTable(w io.Writer) error {
	spread := "spread evenly"
	if r.Hot > 0 {
		spread = fmt.Sprintf("%.0f%% on one hot key", r.Hot*100)
	}
	fmt.Fprintf(w, "%s\n%d workers, %s keys %s, %.2fs\n\n", r.Target, r.Concurrency, thousands(uint64(r.Keys)), spread, r.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "decisions/s\tdecisions\tallowed\tdenied\terrors\tp50\tp90\tp99\tp99.9\tmax\t")
	l := r.Latency
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
		thousands(uint64(r.PerSecond+0.5)), thousands(r.Checks), thousands(r.Allowed), thousands(r.Denied), thousands(r.Errors),
		micros(l.P50), micros(l.P90), micros(l.P99), micros(l.P999), micros(l.Max))
	return tw.Flush()
}

// printProgress overwrites the current terminal line with p.
func printProgress(w io.Writer, p loadgen.Progress) {
	rate := 0.0
	if p.Elapsed > 0 {
		rate = float64(p.Ops) / p.Elapsed.Seconds()
	}
	fmt.Fprintf(w, "\r\033[K%6.1fs  %s decisions  %s/s  %s errors", p.Elapsed.Seconds(), thousands(p.Ops), thousands(uint64(rate)), thousands(p.Errors))
}

// thousands formats n with commas: 1234567 is "1,234,567".
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// micros formats a latency in microseconds with a readable unit.
func micros(us float64) string {
	switch {
	case us < 1000:
		return strconv.FormatFloat(us, 'f', 1, 64) + "µs"
	case us < 1e6:
		return strconv.FormatFloat(us/1e3, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(us/1e6, 'f', 2, 64) + "s"
}
