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
	// Fleet, when set (by the caller, from RunAsync on the same
	// workload), is an async fleet's row of the enforcing-mode table.
	Fleet *FleetRow `json:"-"`
}

// FleetRow names an async fleet's result for Report.WriteTable.
type FleetRow struct {
	Name string
	AsyncReport
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
	Algorithm      string `json:"algorithm"`
	Limited        int64  `json:"limited"`         // requests the algorithm limits
	ExactLimited   int64  `json:"exact_limited"`   // requests the exact log limits
	WronglyAllowed int64  `json:"wrongly_allowed"` // allowed, but the exact log limits them
	WronglyDenied  int64  `json:"wrongly_denied"`  // limited, but the exact log allows them
	// MeanRateDiff is the mean of |estimate − real| / real over requests,
	// for the algorithms whose usage estimates the window's count; nil for
	// gcra, whose usage is the cost still in flight, not a count.
	MeanRateDiff      *float64 `json:"mean_rate_diff,omitempty"`
	SourcesLimited    int64    `json:"sources_limited"`     // limited at least once by the algorithm
	SourcesOver       int64    `json:"sources_over"`        // over the limit at least once, exactly
	FalselyLimited    int64    `json:"falsely_limited"`     // limited, never really over
	FalselyLetThrough int64    `json:"falsely_let_through"` // really over, never limited
	// WorstMiss is how far over the threshold the worst source falsely let
	// through went: its highest real rate / Rate − 1. Zero when none.
	WorstMiss float64 `json:"worst_miss"`
	// Model names what the algorithm promises: "exact window"
	// (sliding-window, buckets and log estimate it), "AR1 count" (decay)
	// or "GCRA (TAT)" (gcra).
	Model string `json:"model"`
	// ModelWronglyDecided counts the requests on which the algorithm's
	// verdict differs from its model's, replayed exactly on the same
	// history; for the window algorithms it is WronglyAllowed +
	// WronglyDenied.
	ModelWronglyDecided int64 `json:"model_wrongly_decided"`
	// ModelMeanDiff is the mean over requests of |usage − model's usage| /
	// (model's usage + 1), the request counted on both sides.
	ModelMeanDiff float64 `json:"model_mean_diff"`
	// WorstWindow is the worst true window, in enforcing mode only.
	WorstWindow *WorstWindow `json:"worst_window,omitempty"`
}

// WorstWindow is what an enforcing algorithm lets through, against the
// exact window: for every source that the exact limit limits (its offered
// requests exceed Rate in some window of length Window), the largest number
// of requests the algorithm admitted in any window of length Window, over
// every position of the window, in units of Rate. The exact log scores 1.
type WorstWindow struct {
	Sources int64   `json:"sources"` // sources the exact limit limits
	Mean    float64 `json:"mean"`    // mean over those sources, in units of Rate
	Max     float64 `json:"max"`     // the largest, in units of Rate
}

// Series is the recorded requests of one watched source.
type Series struct {
	Source int     // index in the workload
	Title  string  // for the plot; Run leaves it empty
	Points []Point // one per request
}

func (t *tally) result(name string, rate int64, enforce bool) Result {
	r := Result{Algorithm: name, Limited: t.limited, ExactLimited: t.exactLimited,
		WronglyAllowed: t.wronglyAllowed, WronglyDenied: t.wronglyDenied,
		SourcesLimited: t.sourcesLimited, SourcesOver: t.sourcesOver,
		FalselyLimited: t.falselyLimited, FalselyLetThrough: t.falselyLetThrough,
		Model: modelName(name), ModelWronglyDecided: t.modelWrong}
	n := float64(max(1, t.requests))
	if r.Model != modelGCRA {
		diff := t.diff.value() / n
		r.MeanRateDiff = &diff
	}
	r.ModelMeanDiff = t.modelDiff.value() / n
	if t.worstMiss > 0 {
		r.WorstMiss = float64(t.worstMiss-rate) / float64(rate)
	}
	if enforce {
		w := &WorstWindow{Sources: t.overSources, Max: float64(t.worstMax) / float64(rate)}
		if t.overSources > 0 {
			w.Mean = float64(t.worstSum) / float64(t.overSources) / float64(rate)
		}
		r.WorstWindow = w
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

// WriteTable writes the comparison as two aligned text tables: each
// algorithm against the exact window, followed by Cloudflare's published
// figures for the sliding window; then each algorithm against its own
// model and, in enforcing mode, its worst true window.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "algorithm\twrongly allowed\twrongly denied\twrongly decided\tmean rate diff\tsources falsely limited\tfalsely let through\tworst miss\t")
	writeRows(tw, "", rep.Requests, rep.Results, false)
	fmt.Fprintf(tw, "cloudflare*\t\t\t%.3f%%\t%.0f%%\t%d\t%d\t< +15%%\t\n",
		cloudflareWrong, cloudflareDiff, cloudflareFalsePos, cloudflareFalseNeg)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "* Cloudflare's published figures for the two-counter sliding window: 400M requests, 270,000 sources.")
	fmt.Fprintln(w, "  gcra's mean rate diff is not shown: its usage is the cost still in flight, not a count.")
	fmt.Fprintln(w)
	return rep.writeModelTable(w)
}

// writeModelTable writes each algorithm against what it promises and, in
// enforcing mode, its worst true window.
func (rep *Report) writeModelTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	enforce, n := rep.Mode == "enforce", float64(max(1, rep.Requests))
	head := "algorithm\tpromises\twrongly decided vs its promise\tmean diff vs its promise\t"
	if enforce {
		head += "worst window, mean\tworst window, max\tfalse denials\t"
	}
	fmt.Fprintln(tw, head)
	sources := int64(0)
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%.4f%%\t%.2f%%\t", r.Algorithm, r.Model,
			100*float64(r.ModelWronglyDecided)/n, 100*r.ModelMeanDiff)
		if enforce && r.WorstWindow != nil {
			writeWorst(tw, r.WorstWindow)
			sources = r.WorstWindow.Sources
			fmt.Fprintf(tw, "%.4f%%\t", 100*float64(r.WronglyDenied)/n)
		}
		fmt.Fprintln(tw)
	}
	if f := rep.Fleet; enforce && f != nil {
		fmt.Fprintf(tw, "%s\texact window\t-\t-\t", f.Name)
		writeWorst(tw, &WorstWindow{Sources: int64(f.Sources), Mean: f.Mean, Max: f.Max})
		fmt.Fprintf(tw, "%.4f%%\t\n", 100*float64(f.FalseDenials)/float64(max(1, f.Requests)))
	}
	if err := tw.Flush(); err != nil || !enforce {
		return err
	}
	_, err := fmt.Fprintf(w, "worst window: the most requests admitted in any window of %s, in units of the limit L,\n"+
		"  over the %d sources whose offered requests exceed L in some window (mean and max).\n"+
		"false denials: requests denied while the exact count of what was admitted in the window before them\n"+
		"  was under L, as a share of all requests.\n", formatMicros(rep.Window), sources)
	return err
}

// WriteClassTable writes Classes as two aligned tables: the classes' share
// of the trace, then each class's results as shares of its own requests.
func (rep *Report) WriteClassTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tsources\trequests\tshare of requests\tover the limit (exact)\t")
	for _, c := range rep.Classes {
		over := "-"
		switch {
		case len(c.Results) == 0:
		case c.Results[0].WorstWindow != nil: // enforcing: each algorithm has its own reference
			over = fmt.Sprintf("%d sources", c.Results[0].WorstWindow.Sources)
		case rep.Mode == "shadow":
			over = fmt.Sprintf("%.2f%% of requests", 100*float64(c.Results[0].ExactLimited)/float64(max(1, c.Requests)))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\t%s\t\n", c.Class, c.Sources, c.Requests,
			100*float64(c.Requests)/float64(max(1, rep.Requests)), over)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "class\talgorithm\twrongly allowed\twrongly denied\twrongly decided\tmean rate diff\tsources falsely limited\tfalsely let through\tworst miss\t"
	if enforce := rep.Mode == "enforce"; enforce {
		head += "worst window, mean\tmax\t"
	}
	fmt.Fprintln(tw, head)
	for _, c := range rep.Classes {
		writeRows(tw, c.Class, c.Requests, c.Results, rep.Mode == "enforce")
	}
	return tw.Flush()
}

// writeRows writes one row per result, as shares of requests, prefixed
// by a label column (filled on the first row only) when label is not
// empty, followed by the worst window when worst is set.
func writeRows(tw io.Writer, label string, requests int64, results []Result, worst bool) {
	withLabel, n := label != "", float64(max(1, requests))
	for k, r := range results {
		if withLabel {
			if k > 0 {
				label = ""
			}
			fmt.Fprintf(tw, "%s\t", label)
		}
		fmt.Fprintf(tw, "%s\t%.4f%%\t%.4f%%\t%.4f%%\t%s\t%d\t%d\t%s\t", r.Algorithm,
			100*float64(r.WronglyAllowed)/n, 100*float64(r.WronglyDenied)/n,
			100*float64(r.WronglyAllowed+r.WronglyDenied)/n, rateDiff(r),
			r.FalselyLimited, r.FalselyLetThrough, miss(r))
		if worst && r.WorstWindow != nil {
			writeWorst(tw, r.WorstWindow)
		}
		fmt.Fprintln(tw)
	}
}

// writeWorst writes the two cells of a worst window: mean and max.
func writeWorst(tw io.Writer, w *WorstWindow) {
	if w.Sources == 0 {
		fmt.Fprint(tw, "-\t-\t")
		return
	}
	fmt.Fprintf(tw, "%.2f L\t%.2f L\t", w.Mean, w.Max)
}

func rateDiff(r Result) string {
	if r.MeanRateDiff == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100**r.MeanRateDiff)
}

func miss(r Result) string {
	if r.FalselyLetThrough == 0 {
		return "-"
	}
	return fmt.Sprintf("+%.1f%%", 100*r.WorstMiss)
}
