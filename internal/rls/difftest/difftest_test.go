package difftest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// request is one request sent to both servers.
type request struct {
	domain string
	descs  []*rlv3.RateLimitDescriptor
	addend uint32 // the request's hits_addend
	json   bool   // POST /json instead of gRPC
	body   string // a raw /json body, sent as is (malformed input)
}

// answer is what a server answered: an error, or a response.
type answer struct {
	failure string // "grpc Unknown", "http 400"; empty for a response
	http    int    // the HTTP status of a /json answer
	resp    *pb.RateLimitResponse
}

func (a answer) String() string {
	if a.failure != "" {
		return a.failure
	}
	s := protojson.Format(a.resp)
	s = strings.Join(strings.Fields(s), " ")
	if a.http != 0 {
		return fmt.Sprintf("http %d %s", a.http, s)
	}
	return s
}

func send(t *testing.T, e endpoint, r request) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &pb.RateLimitRequest{Domain: r.domain, Descriptors: r.descs, HitsAddend: r.addend}
	if !r.json && r.body == "" {
		resp, err := e.client.ShouldRateLimit(ctx, req)
		if err != nil {
			return answer{failure: "grpc " + status.Code(err).String()}
		}
		return answer{resp: resp}
	}
	body := []byte(r.body)
	if r.body == "" {
		var err error
		if body, err = protojson.Marshal(req); err != nil {
			t.Fatal(err)
		}
	}
	hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.json, bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatalf("POST /json: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		return answer{failure: fmt.Sprintf("http %d", resp.StatusCode)}
	}
	out := &pb.RateLimitResponse{}
	if err := protojson.Unmarshal(data, out); err != nil {
		return answer{failure: fmt.Sprintf("http %d, a body that is not a RateLimitResponse", resp.StatusCode)}
	}
	for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"} {
		if resp.Header.Get(h) != "" {
			out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, nil) // marks an HTTP header: never equal
		}
	}
	return answer{http: resp.StatusCode, resp: out}
}

// differences lists what differs between envoyproxy/ratelimit's answer up
// and sluice's answer sl, each as the name of the field: overall code,
// per-descriptor code, current_limit (name, unit, requests_per_unit,
// unit_multiplier), limit_remaining, presence of duration_until_reset,
// the names of the response headers and the values of RateLimit-Limit and
// RateLimit-Remaining, the HTTP status of /json, and errors.
func differences(up, sl answer) []string {
	if up.failure != "" || sl.failure != "" {
		if up.failure != sl.failure {
			return []string{"error"}
		}
		return nil
	}
	var d []string
	add := func(cond bool, what string) {
		if cond && !slices.Contains(d, what) {
			d = append(d, what)
		}
	}
	add(up.http != sl.http, "http_status")
	add(up.resp.OverallCode != sl.resp.OverallCode, "overall_code")
	if len(up.resp.Statuses) != len(sl.resp.Statuses) {
		return append(d, "statuses")
	}
	for i, u := range up.resp.Statuses {
		s := sl.resp.Statuses[i]
		add(u.Code != s.Code, "code")
		uc, sc := u.CurrentLimit, s.CurrentLimit
		add((uc == nil) != (sc == nil), "current_limit")
		if uc != nil && sc != nil {
			add(uc.Name != sc.Name, "current_limit.name")
			add(uc.Unit != sc.Unit, "current_limit.unit")
			add(uc.RequestsPerUnit != sc.RequestsPerUnit, "current_limit.requests_per_unit")
			add(uc.UnitMultiplier.GetValue() != sc.UnitMultiplier.GetValue(), "current_limit.unit_multiplier")
		}
		add(u.LimitRemaining != s.LimitRemaining, "limit_remaining")
		add((u.DurationUntilReset == nil) != (s.DurationUntilReset == nil), "duration_until_reset")
	}
	add(!slices.Equal(headerNames(up.resp), headerNames(sl.resp)), "header_names")
	for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining"} {
		add(header(up.resp, h) != header(sl.resp, h), "header "+h)
	}
	return d
}

func headerNames(r *pb.RateLimitResponse) []string {
	var names []string
	for _, h := range r.ResponseHeadersToAdd {
		if h == nil {
			names = append(names, "(an HTTP response header)")
			continue
		}
		names = append(names, h.Key)
	}
	return names
}

func header(r *pb.RateLimitResponse, name string) string {
	for _, h := range r.ResponseHeadersToAdd {
		if h != nil && h.Key == name {
			return h.Value
		}
	}
	return ""
}

// scenario is a sequence of requests on counters no other scenario of its
// mode uses, sent within one minute (see awayFromBoundary).
type scenario struct {
	name string
	// before runs first, such as a change to the rule directory.
	before func(t *testing.T, p *pair)
	reqs   []request
}

// TestDifferential sends every scenario to envoyproxy/ratelimit and sluice
// in each mode and compares the answers request by request. A scenario
// whose differences are not exactly those pinned in pinned fails, with
// the answers that differ. It also holds the drop-in figure that the
// documentation quotes: at least 400 requests, at least 99% identical.
func TestDifferential(t *testing.T) {
	service, _ := binaries(t)
	rules := ruleFiles(t)
	modes := []mode{{name: "plain"}, {name: "headers", headers: true}, {name: "shadow", headers: true, shadow: true}}
	total, same := 0, 0
	seen := map[string]bool{}
	for _, m := range modes {
		p := newPair(t, service, m, rules)
		for _, sc := range scenarios(m) {
			key := m.name + "/" + sc.name
			seen[key] = true
			if sc.before != nil {
				sc.before(t, p)
			}
			awayFromBoundary()
			var differing []string
			fields := map[string]bool{}
			for i, r := range sc.reqs {
				up, sl := send(t, p.upstream, r), send(t, p.sluice, r)
				total++
				d := differences(up, sl)
				if len(d) == 0 {
					same++
					continue
				}
				for _, f := range d {
					fields[f] = true
				}
				differing = append(differing, fmt.Sprintf("  #%d %s %s: %s\n    envoyproxy/ratelimit: %s\n    sluice:               %s",
					i, r.domain, describe(r), strings.Join(d, ", "), up, sl))
			}
			got := summary(len(differing), fields)
			if want := pinned[key]; got != want {
				t.Errorf("%s: differences %q, pinned %q:\n%s", key, got, want, strings.Join(differing, "\n"))
			}
		}
	}
	for key := range pinned {
		if !seen[key] {
			t.Errorf("pinned scenario %s does not exist", key)
		}
	}
	t.Logf("%d of %d requests answered identically to envoyproxy/ratelimit %s (%.1f%%)", same, total, Version, 100*float64(same)/float64(total))
	if total < 400 || float64(same) < 0.99*float64(total) {
		t.Errorf("%d of %d requests identical; want at least 400 requests, 99%% identical", same, total)
	}
}

// summary is a scenario's differences as pinned: how many requests differ
// and in which fields.
func summary(n int, fields map[string]bool) string {
	if n == 0 {
		return ""
	}
	names := make([]string, 0, len(fields))
	for f := range fields {
		names = append(names, f)
	}
	slices.Sort(names)
	return fmt.Sprintf("%d: %s", n, strings.Join(names, ", "))
}

func describe(r request) string {
	if r.body != "" {
		return fmt.Sprintf("/json body %q", r.body)
	}
	var b strings.Builder
	if r.json {
		b.WriteString("/json ")
	}
	for _, d := range r.descs {
		b.WriteByte('[')
		for i, e := range d.Entries {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%s", e.Key, e.Value)
		}
		if d.HitsAddend != nil {
			fmt.Fprintf(&b, " +%d", d.HitsAddend.GetValue())
		}
		if d.Limit != nil {
			fmt.Fprintf(&b, " limit %d/%v", d.Limit.RequestsPerUnit, d.Limit.Unit)
		}
		b.WriteByte(']')
	}
	if r.addend != 0 {
		fmt.Fprintf(&b, " hits_addend %d", r.addend)
	}
	return b.String()
}

// awayFromBoundary waits past the next minute boundary when it is less
// than 5 s away, so that a scenario's counters stay in one window of
// envoyproxy/ratelimit's fixed minutes (sluice's sliding window and a fixed
// one agree on counters first used in the current window).
func awayFromBoundary() {
	now := time.Now()
	next := now.Truncate(time.Minute).Add(time.Minute)
	if next.Sub(now) < 5*time.Second {
		time.Sleep(next.Sub(now) + 200*time.Millisecond)
	}
}

func ruleFiles(t *testing.T) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob("testdata/config/*.yaml")
	if err != nil || len(names) == 0 {
		t.Fatalf("no rule files in testdata/config: %v", err)
	}
	files := map[string][]byte{}
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(n)] = data
	}
	return files
}

// d builds a descriptor from key, value pairs.
func d(kv ...string) *rlv3.RateLimitDescriptor {
	out := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Entries = append(out.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

// plus sets a descriptor's own hits_addend.
func plus(n uint64, x *rlv3.RateLimitDescriptor) *rlv3.RateLimitDescriptor {
	x.HitsAddend = wrapperspb.UInt64(n)
	return x
}

// limited gives a descriptor a limit override.
func limited(n uint32, unit typev3.RateLimitUnit, mult uint32, x *rlv3.RateLimitDescriptor) *rlv3.RateLimitDescriptor {
	x.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: unit}
	if mult > 0 {
		x.Limit.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return x
}

// times repeats a request n times.
func times(n int, r request) []request {
	out := make([]request, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// ask is a gRPC request of descriptors to domain.
func ask(domain string, descs ...*rlv3.RateLimitDescriptor) request {
	return request{domain: domain, descs: descs}
}

// viaJSON sends r over POST /json.
func viaJSON(r request) request {
	r.json = true
	return r
}

func cat(parts ...[]request) []request { return slices.Concat(parts...) }
