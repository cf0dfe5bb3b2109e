package sim

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/sluicehq/sluice/internal/algo"
)

// Panel is one source's part of a plot: its series over [From, To).
type Panel struct {
	Title    string
	Series   Series
	From, To int64 // µs; To ≤ From means the whole series
}

// Plot geometry, in SVG user units.
const (
	plotWidth   = 960
	panelHeight = 250
	marginLeft  = 64
	marginRight = 24
	legendH     = 56
	panelGap    = 64
	maxPoints   = 2000 // per line; more are thinned evenly
)

// plotColors are the line colors by algorithm name; the exact rate is black
// and the threshold red.
var plotColors = map[string]string{
	"sliding-window": "#1f77b4", "buckets": "#ff7f0e", "log": "#2ca02c", "decay": "#9467bd", "gcra": "#8c564b",
}

// WritePlot draws, for each panel, the exact rate and every algorithm's
// estimate (names in the order of the points' estimates) over time, with
// the threshold p.Rate, as a standalone SVG document. Lines that leave a
// panel are clipped at its edge.
func WritePlot(w io.Writer, p algo.Params, names []string, panels []Panel) error {
	b := bufio.NewWriter(w)
	height := legendH + len(panels)*(panelHeight+panelGap) + 24
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotWidth, height, plotWidth, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	writeLegend(b, names, p)
	for k, pn := range panels {
		writePanel(b, p, names, pn, k, legendH+k*(panelHeight+panelGap)+panelGap-16)
	}
	fmt.Fprintln(b, "</svg>")
	return b.Flush()
}

func writeLegend(b *bufio.Writer, names []string, p algo.Params) {
	fmt.Fprintf(b, `<text x="%d" y="20" font-size="15" font-weight="bold">Estimated vs real rate (requests in the sliding window of %s), limit %d</text>`+"\n",
		marginLeft, formatMicros(p.Window), p.Rate)
	x := marginLeft
	item := func(label, color, dash string, width float64) {
		fmt.Fprintf(b, `<line x1="%d" y1="40" x2="%d" y2="40" stroke="%s" stroke-width="%g"%s/>`, x, x+24, color, width, dash)
		fmt.Fprintf(b, `<text x="%d" y="44">%s</text>`+"\n", x+30, html.EscapeString(label))
		x += 44 + 7*len(label)
	}
	item("exact (log)", "black", "", 3)
	item("threshold", "#d62728", ` stroke-dasharray="6 4"`, 1.5)
	for _, n := range names {
		item(n, lineColor(n), lineDash(n), 1.5)
	}
}

func lineColor(name string) string {
	if c, ok := plotColors[name]; ok {
		return c
	}
	return "gray"
}

// lineDash dots the log's line: it lies exactly on the black exact rate.
func lineDash(name string) string {
	if name == "log" {
		return ` stroke-dasharray="2 3"`
	}
	return ""
}

// view maps a panel's time and rate ranges onto its rectangle.
type view struct {
	x0, y0, w, h float64 // the rectangle
	from, to     int64   // µs
	ymax         float64
}

func (v view) x(at int64) float64  { return v.x0 + v.w*float64(at-v.from)/float64(v.to-v.from) }
func (v view) y(r float64) float64 { return v.y0 + v.h - v.h*r/v.ymax }

func writePanel(b *bufio.Writer, p algo.Params, names []string, pn Panel, k, top int) {
	pts := visible(pn)
	if len(pts) == 0 {
		fmt.Fprintf(b, `<text x="%d" y="%d">%s: no requests</text>`+"\n", marginLeft, top, html.EscapeString(pn.Title))
		return
	}
	v := view{x0: marginLeft, y0: float64(top), w: plotWidth - marginLeft - marginRight, h: panelHeight,
		from: pn.From, to: pn.To}
	if v.to <= v.from {
		v.from, v.to = pts[0].At, pts[len(pts)-1].At+1
	}
	peak := float64(p.Rate)
	for _, pt := range pts {
		peak = max(peak, float64(pt.Real))
	}
	step := niceStep(peak * 1.25 / 5)
	v.ymax = step * math.Ceil(peak*1.25/step)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", marginLeft, top-8, html.EscapeString(pn.Title))
	writeAxes(b, v, step)
	fmt.Fprintf(b, `<clipPath id="c%d"><rect x="%g" y="%g" width="%g" height="%g"/></clipPath><g clip-path="url(#c%d)">`+"\n", k, v.x0, v.y0, v.w, v.h, k)
	fmt.Fprintf(b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#d62728" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n",
		v.x0, v.y(float64(p.Rate)), v.x0+v.w, v.y(float64(p.Rate)))
	writeLine(b, v, pts, func(pt Point) float64 { return float64(pt.Real) }, "black", "", 3)
	for a, n := range names {
		writeLine(b, v, pts, func(pt Point) float64 { return pt.Estimate[a] }, lineColor(n), lineDash(n), 1.5)
	}
	fmt.Fprintln(b, "</g>")
}

// visible returns the panel's points inside [From, To), thinned evenly to
// at most maxPoints.
func visible(pn Panel) []Point {
	var pts []Point
	for _, pt := range pn.Series.Points {
		if pn.To <= pn.From || (pt.At >= pn.From && pt.At < pn.To) {
			pts = append(pts, pt)
		}
	}
	if len(pts) <= maxPoints {
		return pts
	}
	thin := make([]Point, 0, maxPoints)
	for k := range maxPoints {
		thin = append(thin, pts[k*len(pts)/maxPoints])
	}
	return thin
}

func writeLine(b *bufio.Writer, v view, pts []Point, val func(Point) float64, color, dash string, width float64) {
	var s strings.Builder
	for _, pt := range pts {
		y := min(max(v.y(val(pt)), v.y0-10), v.y0+v.h+10) // clip far outliers, keep the SVG small
		fmt.Fprintf(&s, "%.1f,%.1f ", v.x(pt.At), y)
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="%g"%s stroke-linejoin="round" points="%s"/>`+"\n",
		color, width, dash, strings.TrimSpace(s.String()))
}

func writeAxes(b *bufio.Writer, v view, ystep float64) {
	fmt.Fprintf(b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#888"/>`+"\n", v.x0, v.y0, v.w, v.h)
	for r := 0.0; r <= v.ymax+ystep/2; r += ystep {
		y := v.y(r)
		fmt.Fprintf(b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#e5e5e5"/><text x="%g" y="%.1f" text-anchor="end">%g</text>`+"\n",
			v.x0, y, v.x0+v.w, y, v.x0-6, y+4, r)
	}
	span := float64(v.to-v.from) / 1e6 // seconds
	unit, scale := "s", 1.0
	if span >= 600 {
		unit, scale = "min", 60
	}
	xstep := niceStep(span / scale / 8)
	for s := 0.0; s <= span/scale; s += xstep {
		x := v.x(v.from + int64(s*scale*1e6))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#888"/><text x="%.1f" y="%g" text-anchor="middle">%g %s</text>`+"\n",
			x, v.y0+v.h, x, v.y0+v.h+5, x, v.y0+v.h+18, s, unit)
	}
	fmt.Fprintf(b, `<text x="%g" y="%g" text-anchor="end" fill="#555">time from the start of the panel</text>`+"\n", v.x0+v.w, v.y0+v.h+34)
}

// niceStep returns 1, 2 or 5 times a power of ten, at least x.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// formatMicros formats a duration in µs for an axis: "90s", "2m", "1h30m".
func formatMicros(us int64) string {
	s := us / 1e6
	switch {
	case us%1e6 != 0:
		return fmt.Sprintf("%gs", float64(us)/1e6)
	case s < 120 || s%60 != 0:
		return fmt.Sprintf("%ds", s)
	case s%3600 == 0:
		return fmt.Sprintf("%dh", s/3600)
	case s > 3600:
		return fmt.Sprintf("%dh%dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dm", s/60)
}
