package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// simMain runs sluice with args and returns the exit code and both streams.
func simMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	return code, out.String(), errOut.String()
}

var simTiny = []string{"simulate", "-requests", "20000", "-sources", "100", "-duration", "20m", "-limit", "50r/m"}

func TestSimulateTable(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "accuracy.svg")
	code, out, errOut := simMain(t, append(simTiny, "-plot", svg, "-classes")...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"20000 requests from 100 sources over 20m0s, harsh profile, limit 50r/m, seed 1, shadow mode",
		"sliding-window", "buckets", "log", "decay", "gcra", "cloudflare*", "0.003%", "steady-over",
		"promises", "GCRA (TAT)", "AR1 count"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	f, err := os.Open(svg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, lines, titles := xml.NewDecoder(f), 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("plot is not well-formed XML: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "polyline" {
			lines++
		}
		if cd, ok := tok.(xml.CharData); ok && strings.HasPrefix(string(cd), "source ") {
			titles++
		}
	}
	// Three panels, each with the exact rate and five estimates.
	if lines != 3*6 || titles != 3 {
		t.Errorf("plot has %d lines and %d panel titles, want 18 and 3", lines, titles)
	}
}

func TestSimulateJSON(t *testing.T) {
	decode := func(args ...string) map[string]any {
		t.Helper()
		code, out, errOut := simMain(t, args...)
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out)
		}
		delete(v, "elapsed_seconds")
		return v
	}
	a := decode(append(simTiny, "-json", "-mode", "enforce", "-algorithms", "log,sliding-window")...)
	if a["requests"] != 20000.0 || a["mode"] != "enforce" || a["limit"] != "50r/m" {
		t.Errorf("report header %v", a)
	}
	algs := a["algorithms"].([]any)
	if len(algs) != 2 {
		t.Fatalf("%d algorithms, want 2", len(algs))
	}
	log := algs[0].(map[string]any)
	if log["algorithm"] != "log" || log["wrongly_allowed"] != 0.0 || log["wrongly_denied"] != 0.0 || log["limited"] == 0.0 {
		t.Errorf("log against the exact reference: %v", log)
	}
	if w, ok := log["worst_window"].(map[string]any); !ok || w["mean"] != 1.0 || w["max"] != 1.0 || w["sources"] == 0.0 {
		t.Errorf("log's worst window: %v, want exactly 1 L over some sources", log["worst_window"])
	}
	if w, ok := algs[1].(map[string]any)["worst_window"].(map[string]any); !ok || w["max"].(float64) <= 1 {
		t.Errorf("sliding-window's worst window: %v, want over 1 L", w)
	}
	b := decode(append(simTiny, "-json", "-mode", "enforce", "-algorithms", "log,sliding-window", "-workers", "1")...)
	if ja, jb := mustJSON(t, a), mustJSON(t, b); ja != jb {
		t.Errorf("same seed, different reports:\n%s\n%s", ja, jb)
	}
}

// TestSimulateProfiles: the cloudflare profile is a different, calmer
// trace (fewer sources over the limit), named in the output; gcra has no
// mean rate difference in the JSON, and the worst window is printed.
func TestSimulateProfiles(t *testing.T) {
	over := map[string]float64{}
	for _, profile := range []string{"harsh", "cloudflare"} {
		code, out, errOut := simMain(t, "simulate", "-requests", "40000", "-sources", "2000", "-duration", "20m",
			"-limit", "50r/m", "-mode", "enforce", "-json", "-profile", profile)
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", profile, code, errOut)
		}
		var v struct {
			Profile    string           `json:"profile"`
			Algorithms []map[string]any `json:"algorithms"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		if v.Profile != profile {
			t.Errorf("profile %q, want %q", v.Profile, profile)
		}
		for _, a := range v.Algorithms {
			if _, has := a["mean_rate_diff"]; has != (a["algorithm"] != "gcra") {
				t.Errorf("%s: %s has a mean rate diff: %v", profile, a["algorithm"], has)
			}
			if a["algorithm"] == "log" {
				over[profile] = a["worst_window"].(map[string]any)["sources"].(float64)
			}
		}
	}
	if !(over["cloudflare"] > 0 && over["cloudflare"] < over["harsh"]/4) {
		t.Errorf("sources over the limit: harsh %v, cloudflare %v; want a few, far fewer than harsh", over["harsh"], over["cloudflare"])
	}
	code, out, _ := simMain(t, append(simTiny, "-mode", "enforce", "-profile", "cloudflare")...)
	if code != 0 || !strings.Contains(out, "cloudflare profile") || !strings.Contains(out, "worst window, max") {
		t.Errorf("exit %d, table:\n%s", code, out)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSimulateBadInput(t *testing.T) {
	cases := []struct {
		args     []string
		code     int
		mentions string
	}{
		{[]string{"simulate", "-limit", "10x/m"}, 2, `"10x/m"`},
		{[]string{"simulate", "-mode", "strict"}, 2, `"strict"`},
		{[]string{"simulate", "-profile", "calm"}, 2, `"calm"`},
		{[]string{"simulate", "-algorithms", "log,fixed"}, 2, `"fixed"`},
		{[]string{"simulate", "-limit", "10r/m", "-resolution", "7s"}, 2, "does not divide"},
		{[]string{"simulate", "extra"}, 2, `"extra"`},
		{[]string{"simulate", "-requests", "100", "-sources", "100"}, 1, "too few"},
		{[]string{"simulate", "-async-processes", "4"}, 2, "needs -mode enforce"},
		{[]string{"simulate", "-mode", "enforce", "-async-processes", "-1"}, 2, "must be >= 0"},
	}
	for _, c := range cases {
		code, _, errOut := simMain(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.mentions) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %s", c.args, code, errOut, c.code, c.mentions)
		}
	}
	if code, _, _ := simMain(t, "simulate", "-h"); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
}

// TestSimulateAsync puts an async fleet's worst window beside the
// synchronous algorithms': a fleet of 4 that shares what remains (share 4)
// lets through more than the exact log, and less than the 2 L that every
// estimating algorithm may reach.
func TestSimulateAsync(t *testing.T) {
	args := append(simTiny, "-mode", "enforce", "-algorithms", "log", "-async-processes", "4", "-json")
	code, out, errOut := simMain(t, args...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var rep struct {
		Async *struct {
			Processes int     `json:"processes"`
			Share     int     `json:"share"`
			Sources   int     `json:"sources"`
			Mean      float64 `json:"worst_window_mean"`
			Max       float64 `json:"worst_window_max"`
		} `json:"async"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	a := rep.Async
	if a == nil || a.Processes != 4 || a.Share != 4 || a.Sources == 0 {
		t.Fatalf("async report %+v, want 4 processes sharing 4 ways over the limited sources", a)
	}
	if a.Mean < 1 || a.Max < a.Mean || a.Max >= 2 {
		t.Errorf("async worst window %.3f mean / %.3f max; want 1 <= mean <= max < 2", a.Mean, a.Max)
	}
	code, out, _ = simMain(t, append(simTiny, "-mode", "enforce", "-algorithms", "log", "-async-processes", "4")...)
	if code != 0 || !strings.Contains(out, "async mode, 4 processes (share 4, sync interval 100ms") {
		t.Errorf("table output lacks the async line:\n%s", out)
	}
}
