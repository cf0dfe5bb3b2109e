package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/rls"
)

// dashboardExprs returns every query of examples/grafana/sluice.json:
// the panels' targets and the template variables'.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "grafana", "sluice.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Definition string }
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("sluice.json: %v", err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			exprs = append(exprs, v.Definition)
		}
	}
	return exprs
}

// scrape returns the series names of a /metrics page with the label
// names seen on each, and each family's type.
func scrape(t *testing.T, url string, series map[string]map[string]bool, types map[string]string) {
	t.Helper()
	resp, body := get(t, url, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d", url, resp.StatusCode)
	}
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		name = strings.Fields(name)[0]
		if series[name] == nil {
			series[name] = map[string]bool{}
		}
		for _, m := range label.FindAllStringSubmatch(rest, -1) {
			series[name][m[1]] = true
		}
	}
}

// TestGrafanaDashboard checks that every metric the Grafana dashboard
// queries is one real servers export, with the labels the query groups
// by: a server on the memory store, and one on a real Redis with an async
// zone (breaker, deny cache, async metrics), both after some traffic and,
// for the second, a degraded decision once Redis is killed. Both serve
// an Envoy rate-limit domain, driven through POST /json to every rls
// metric: a denial, a request with too many descriptors, more digest
// labels than their bound (memory store), data under a descriptor's key
// that is not sluice's, and a degraded check (Redis).
func TestGrafanaDashboard(t *testing.T) {
	r := redistest.Standalone(t)
	dir := t.TempDir()
	rules := "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1}\n  - key: detail\n    detailed_metric: true\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	rlsConfig, grpc := "rls: {config_dir: '"+dir+"'}\n", "{addr: '127.0.0.1:0', serve: grpc}"
	mem := start(t, parseConfig(t, "listeners: [{addr: '127.0.0.1:0'}, "+grpc+"]\nzones: [{name: a, limits: 1r/m}]\n"+rlsConfig), Options{})
	rds := start(t, parseConfig(t, "listeners: [{addr: '127.0.0.1:0'}, "+grpc+"]\nstore: {url: '"+r.URL()+"'}\nzones:\n  - {name: a, limits: 1r/m}\n  - {name: b, limits: 100r/m, mode: async}\n"+rlsConfig), Options{})
	descriptors := func(key string, n, from int) string {
		var ds []string
		for i := range n {
			ds = append(ds, `{"entries":[{"key":"`+key+`","value":"v`+strconv.Itoa(from+i)+`"}]}`)
		}
		return `{"domain":"edge","descriptors":[` + strings.Join(ds, ",") + `]}`
	}
	for _, ts := range []*testServer{mem, rds} {
		for range 3 {
			post(t, ts.api+"/v1/check", `{"zone":"a","key":"k"}`)
			post(t, ts.api+"/json", descriptors("user", 1, 0))
		}
		post(t, ts.api+"/v1/reset", `{"zone":"a","key":"k"}`)
	}
	// Oversized, then past the bound of labels with value digests.
	if resp, _ := post(t, mem.api+"/json", descriptors("user", rls.MaxLimitedDescriptors+1, 0)); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("/json with too many descriptors: %d, want 429", resp.StatusCode)
	}
	for from := 0; from <= rls.MaxMetricValues; from += rls.MaxLimitedDescriptors {
		post(t, mem.api+"/json", descriptors("detail", rls.MaxLimitedDescriptors, from))
	}
	// Bad state: a list where the state of a descriptor's key belongs.
	before, err := r.Do("KEYS", "*").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	post(t, rds.api+"/json", descriptors("user", 1, 1))
	after, err := r.Do("KEYS", "*").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range after {
		if !slices.Contains(before, k) {
			r.Do("DEL", k)
			r.Do("LPUSH", k, "x")
		}
	}
	post(t, rds.api+"/json", descriptors("user", 1, 1))
	post(t, rds.api+"/v1/check", `{"zone":"b","key":"k"}`)
	r.Kill() // a degraded decision: the zone fails open
	if resp, _ := post(t, rds.api+"/v1/check", `{"zone":"a","key":"other"}`); resp.StatusCode != 200 {
		t.Fatalf("a check while Redis is down: %d, want 200 (fail open)", resp.StatusCode)
	}
	post(t, rds.api+"/json", descriptors("user", 1, 2))
	series, types := map[string]map[string]bool{}, map[string]string{}
	scrape(t, mem.api+"/metrics", series, types)
	scrape(t, rds.api+"/metrics", series, types)

	metric := regexp.MustCompile(`\bsluice_[a-z0-9_]+\b`)
	by := regexp.MustCompile(`\bby \(([^)]*)\)`)
	seen := map[string]bool{}
	for _, expr := range dashboardExprs(t) {
		names := metric.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("query %q uses no sluice metric", expr)
		}
		labels := map[string]bool{}
		for _, name := range names {
			seen[name] = true
			if _, ok := series[name]; !ok {
				t.Errorf("query %q: the servers export no %s", expr, name)
				continue
			}
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
			if base != name && types[base] != "histogram" {
				t.Errorf("query %q: %s is not a histogram's series", expr, name)
			}
			for l := range series[name] {
				labels[l] = true
			}
		}
		for _, m := range by.FindAllStringSubmatch(expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); !labels[l] {
					t.Errorf("query %q groups by %q, a label none of its metrics has", expr, l)
				}
			}
		}
	}
	// The list: each is on the dashboard.
	for _, want := range []string{"sluice_checks_total", "sluice_degraded_decisions_total", "sluice_store_duration_seconds_bucket",
		"sluice_store_breaker_open", "sluice_async_pending_cost", "sluice_deny_cache_hits_total",
		"sluice_rls_requests_total", "sluice_rls_descriptors_total", "sluice_rls_degraded_decisions_total", "sluice_rls_bad_state_checks_total",
		"sluice_rls_metric_values_overflow_total", "sluice_rls_oversized_requests_total"} {
		if !seen[want] {
			t.Errorf("the dashboard does not query %s", want)
		}
	}
	t.Logf("%d metrics queried: %v", len(seen), slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	}))
}
