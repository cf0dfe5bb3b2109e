package sim

import (
	"bytes"
	"context"
	"encoding/xml"
	"strconv"
	"strings"
	"testing"
)

func TestNiceStep(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{
		{0, 1}, {0.3, 0.5}, {1, 1}, {1.5, 2}, {3, 5}, {7, 10}, {24, 50}, {120, 200},
	} {
		if got := niceStep(c.in); got != c.want {
			t.Errorf("niceStep(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestWritePlot draws the hand-built sources and checks the document: one
// line for the exact rate and one per algorithm in each panel, every point
// inside its panel (lines that leave it are clipped near its edge), and a
// panel without requests says so.
func TestWritePlot(t *testing.T) {
	names := []string{"sliding-window", "gcra"}
	rep, err := Run(context.Background(), handBuilt, twoPerTen, Options{Algorithms: names, Watch: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	panels := []Panel{
		{Title: "let through", Series: rep.Series[0]},
		{Title: "denied", Series: rep.Series[1], From: 5 * sec, To: 25 * sec},
		{Title: "empty", Series: Series{}},
	}
	var buf bytes.Buffer
	if err := WritePlot(&buf, twoPerTen, names, panels); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	lines := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		el, ok := tok.(xml.StartElement)
		if !ok || el.Name.Local != "polyline" {
			continue
		}
		panel := lines / (1 + len(names))
		top := float64(legendH + panel*(panelHeight+panelGap) + panelGap - 16)
		for _, a := range el.Attr {
			if a.Name.Local != "points" {
				continue
			}
			for _, xy := range strings.Fields(a.Value) {
				_, ys, _ := strings.Cut(xy, ",")
				y, err := strconv.ParseFloat(ys, 64)
				if err != nil || y < top-10 || y > top+panelHeight+10 {
					t.Fatalf("panel %d: point %q outside [%v, %v]", panel, xy, top-10, top+panelHeight+10)
				}
			}
		}
		lines++
	}
	if lines != 2*(1+len(names)) {
		t.Errorf("%d lines, want %d", lines, 2*(1+len(names)))
	}
	if !strings.Contains(buf.String(), "empty: no requests") {
		t.Error("the empty panel does not say it has no requests")
	}
}
