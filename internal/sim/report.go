package sim

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Report is the outcome of Run.
type Report struct {
	Mode     string   `json:"mode"`      // "shadow" or "enforce"
	Rate     int64    `json:"rate"`      // the threshold, per Window
	Window   int64    `json:"window_us"` // µs
	Sources  int      `json:"sources"`
	Requests int64    `json:"requests"`
	Results  []Result `json:"algorithms"` // in the order of Options.Algorithms
	// Classes breaks Results down by traffic class, when the workload
	// has classes (a Trace does): the same counts over its sources only.
	Classes []ClassReport `json:"classes,omitempty"`
	Series  []Series      `json:"-"` // in the order of Options.Watch
}

// ClassReport is the part of a Report about the sources of one class.
type ClassReport struct {
	Class    string   `json:"class"`
	Sources  int      `json:"sources"`
	Requests int64    `json:"requests"`
	Results  []Result `json:"algorithms"`
}

// Result is one algorithm's comparison with the exact reference. Request
// counts are out of Report.Requests, source counts out of Report.Sources.
type Result struct {
	Algorithm         string  `json:"algorithm"`
	Limited           int64   `json:"limited"`             // requests the algorithm limits
	ExactLimited      int64   `json:"exact_limited"`       // requests the exact log limits
	WronglyAllowed    int64   `json:"wrongly_allowed"`     // allowed, but the exact log limits them
	WronglyDenied     int64   `json:"wrongly_denied"`      // limited, but the exact log allows them
	MeanRateDiff      float64 `json:"mean_rate_diff"`      // mean of |estimate − real| / real over requests
	SourcesLimited    int64   `json:"sources_limited"`     // limited at least once by the algorithm
	SourcesOver       int64   `json:"sources_over"`        // over the limit at least once, exactly
	FalselyLimited    int64   `json:"falsely_limited"`     // limited, never really over
	FalselyLetThrough int64   `json:"falsely_let_through"` // really over, never limited
	// WorstMiss is how far over the threshold the worst source falsely let
	// through went: its highest real rate / Rate − 1. Zero when none.
	WorstMiss float64 `json:"worst_miss"`
}

// Series is the recorded requests of one watched source.
type Series struct {
	Source int     // index in the workload
	Title  string  // for the plot; Run leaves it empty
	Points []Point // one per request
}

func (t *tally) result(name string, rate int64) Result {
	r := Result{Algorithm: name, Limited: t.limited, ExactLimited: t.exactLimited,
		WronglyAllowed: t.wronglyAllowed, WronglyDenied: t.wronglyDenied,
		SourcesLimited: t.sourcesLimited, SourcesOver: t.sourcesOver,
		FalselyLimited: t.falselyLimited, FalselyLetThrough: t.falselyLetThrough}
	if t.requests > 0 {
		r.MeanRateDiff = t.diff.value() / float64(t.requests)
	}
	if t.worstMiss > 0 {
		r.WorstMiss = float64(t.worstMiss-rate) / float64(rate)
	}
	return r
}

// Cloudflare's published figures for the two-counter sliding window, from
// 400 million requests of 270,000 sources ("How we built rate limiting
// capable of scaling to millions of domains", 2017).
const (
	cloudflareWrong    = 0.003 // % of requests wrongly allowed or limited
	cloudflareDiff     = 6.0   // % mean difference between real and estimated rate
	cloudflareFalsePos = 0
	cloudflareFalseNeg = 3 // each under 15% over the threshold
)

// WriteTable writes the comparison as an aligned text table, followed by
// Cloudflare's published figures for the sliding window.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "algorithm\twrongly allowed\twrongly denied\twrongly decided\tmean rate diff\tsources falsely limited\tfalsely let through\tworst miss\t")
	writeRows(tw, "", rep.Requests, rep.Results)
	fmt.Fprintf(tw, "cloudflare*\t\t\t%.3f%%\t%.0f%%\t%d\t%d\t< +15%%\t\n",
		cloudflareWrong, cloudflareDiff, cloudflareFalsePos, cloudflareFalseNeg)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "* Cloudflare's published figures for the two-counter sliding window: 400M requests, 270,000 sources.")
	return err
}

// WriteClassTable writes Classes as two aligned tables: the classes' share
// of the trace, then each class's results as shares of its own requests.
func (rep *Report) WriteClassTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tsources\trequests\tshare of requests\tof them over the limit (exact)\t")
	for _, c := range rep.Classes {
		over := "-" // in enforcing mode, each algorithm has its own reference
		if rep.Mode == "shadow" && len(c.Results) > 0 {
			over = fmt.Sprintf("%.2f%%", 100*float64(c.Results[0].ExactLimited)/float64(max(1, c.Requests)))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\t%s\t\n", c.Class, c.Sources, c.Requests,
			100*float64(c.Requests)/float64(max(1, rep.Requests)), over)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\talgorithm\twrongly allowed\twrongly denied\twrongly decided\tmean rate diff\tsources falsely limited\tfalsely let through\tworst miss\t")
	for _, c := range rep.Classes {
		writeRows(tw, c.Class, c.Requests, c.Results)
	}
	return tw.Flush()
}

// writeRows writes one row per result, as shares of requests, prefixed
// by a label column (filled on the first row only) when withLabel is set.
func writeRows(tw io.Writer, label string, requests int64, results []Result) {
	withLabel, n := label != "", float64(max(1, requests))
	for k, r := range results {
		if withLabel {
			if k > 0 {
				label = ""
			}
			fmt.Fprintf(tw, "%s\t", label)
		}
		fmt.Fprintf(tw, "%s\t%.4f%%\t%.4f%%\t%.4f%%\t%.2f%%\t%d\t%d\t%s\t\n", r.Algorithm,
			100*float64(r.WronglyAllowed)/n, 100*float64(r.WronglyDenied)/n,
			100*float64(r.WronglyAllowed+r.WronglyDenied)/n, 100*r.MeanRateDiff,
			r.FalselyLimited, r.FalselyLetThrough, miss(r))
	}
}

func miss(r Result) string {
	if r.FalselyLetThrough == 0 {
		return "-"
	}
	return fmt.Sprintf("+%.1f%%", 100*r.WorstMiss)
}
