// Command benchtable turns `go test -bench` output with repeated runs into
// Markdown tables for docs/bench.md: one table per metric, one row per
// limiter (the /limiter=... part of the benchmark name), one column per
// remaining name (workload, mode), each cell the median of the runs and,
// in brackets, their minimum and maximum.
//
//	benchtable -metrics ns/op,allocs/op results/memory.txt
//
// With -ratios, it also prints ratios of two limiters' values taken within
// each run (the i-th sample of one over the i-th of the other, so a noisy
// round weighs on both alike), median [min–max] of the runs:
//
//	benchtable -ratios 'sluice-gcra/go-limiter,sluice-log/sluice-sliding-window' -ratio-metric cpu-ns/op results/memory.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	metrics := flag.String("metrics", "ns/op", "comma-separated units to tabulate, in order")
	ratios := flag.String("ratios", "", "comma-separated pairs of limiters `a/b` whose per-run ratios to tabulate")
	ratioMetric := flag.String("ratio-metric", "cpu-ns/op", "the unit -ratios compares")
	flag.Parse()
	var pairs []string
	if *ratios != "" {
		pairs = strings.Split(*ratios, ",")
	}
	if err := run(os.Stdout, strings.Split(*metrics, ","), pairs, *ratioMetric, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, metrics, pairs []string, ratioMetric string, files []string) error {
	t := newTable()
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = t.read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	for _, m := range metrics {
		t.write(w, m)
	}
	if len(pairs) > 0 {
		return t.writeRatios(w, ratioMetric, pairs)
	}
	return nil
}

// writeRatios prints, for each pair a/b of limiters, the ratio of their
// values of metric run by run: the i-th sample of a over the i-th of b in
// each column (every run holds each benchmark once, so sample i of every
// limiter comes from run i).
func (t *table) writeRatios(w io.Writer, metric string, pairs []string) error {
	byCol := t.samples[metric]
	var cols []string
	for _, c := range t.cols {
		if byCol[c] != nil {
			cols = append(cols, c)
		}
	}
	fmt.Fprintf(w, "\nratio of %s within each run, median [min–max] of the runs\n\n| ratio |", metric)
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("--:|", len(cols)))
	for _, pair := range pairs {
		a, b, ok := strings.Cut(pair, "/")
		if !ok {
			return fmt.Errorf("-ratios: %q is not a/b", pair)
		}
		fmt.Fprintf(w, "| %s / %s |", a, b)
		for _, c := range cols {
			as, bs := byCol[c][a], byCol[c][b]
			var rs []float64
			for i := range min(len(as), len(bs)) {
				if bs[i] != 0 {
					rs = append(rs, as[i]/bs[i])
				}
			}
			fmt.Fprintf(w, " %s |", cell(rs))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// table holds every sample: samples[metric][column][row].
type table struct {
	samples map[string]map[string]map[string][]float64
	rows    []string // limiters in order of first appearance
	cols    []string // names without the limiter, in order of first appearance
}

func newTable() *table {
	return &table{samples: map[string]map[string]map[string][]float64{}}
}

var (
	procSuffix  = regexp.MustCompile(`-\d+$`)
	limiterPart = regexp.MustCompile(`/limiter=[^/]+`)
)

// read adds the result lines of one benchmark output.
func (t *table) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		name := procSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		row := "-"
		if m := limiterPart.FindString(name); m != "" {
			row = strings.TrimPrefix(m, "/limiter=")
		}
		col := limiterPart.ReplaceAllString(name, "")
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return fmt.Errorf("value %q of %s: %w", f[i], f[0], err)
			}
			t.add(f[i+1], col, row, v)
		}
	}
	return sc.Err()
}

func (t *table) add(metric, col, row string, v float64) {
	if !slices.Contains(t.rows, row) {
		t.rows = append(t.rows, row)
	}
	if !slices.Contains(t.cols, col) {
		t.cols = append(t.cols, col)
	}
	byCol := t.samples[metric]
	if byCol == nil {
		byCol = map[string]map[string][]float64{}
		t.samples[metric] = byCol
	}
	if byCol[col] == nil {
		byCol[col] = map[string][]float64{}
	}
	byCol[col][row] = append(byCol[col][row], v)
}

// write prints the table of one metric, skipping columns without it.
func (t *table) write(w io.Writer, metric string) {
	byCol := t.samples[metric]
	var cols []string
	for _, c := range t.cols {
		if byCol[c] != nil {
			cols = append(cols, c)
		}
	}
	if len(cols) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s, median [min–max] of the runs\n\n| limiter |", metric)
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("--:|", len(cols)))
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s |", r)
		for _, c := range cols {
			fmt.Fprintf(w, " %s |", cell(byCol[c][r]))
		}
		fmt.Fprintln(w)
	}
}

func cell(vs []float64) string {
	if len(vs) == 0 {
		return ""
	}
	s := slices.Sorted(slices.Values(vs))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if len(s) == 1 {
		return num(med)
	}
	return fmt.Sprintf("%s [%s–%s] (n=%d)", num(med), num(s[0]), num(s[len(s)-1]), len(s))
}

// num prints v with three significant digits, without exponent.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1000 || v <= -1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
