package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/config"
)

// The server's decision API (internal/server).
const (
	checkPath = "/v1/check"
	resetPath = "/v1/reset"
)

// defaultServer is where "sluice serve" listens without flags.
const defaultServer = "http://127.0.0.1:8080"

// exitDenied is the exit code of a check that was denied, so scripts can
// tell a denial (3) from an error (1).
const exitDenied = 3

var checkCommand = command{
	name:    "check",
	summary: "ask a running server whether keys may spend a cost now",
	run:     runCheck,
}

// apiFlags are the flags check and reset share.
type apiFlags struct {
	server  string
	zone    string
	timeout time.Duration
	json    bool
	keys    []string
}

func (f *apiFlags) register(env Env, fs interface {
	StringVar(*string, string, string, string)
	DurationVar(*time.Duration, string, time.Duration, string)
	BoolVar(*bool, string, bool, string)
}) {
	server := env.Getenv("SLUICE_SERVER")
	if server == "" {
		server = defaultServer
	}
	fs.StringVar(&f.server, "server", server, "base URL of the sluice server (default $SLUICE_SERVER, else "+defaultServer+")")
	fs.StringVar(&f.zone, "zone", config.DemoZone, "zone to use")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "timeout of the request")
	fs.BoolVar(&f.json, "json", false, "print the server's JSON answer")
}

func runCheck(ctx context.Context, env Env, args []string) int {
	var f apiFlags
	var cost int64
	fs := newFlagSet(env, "check", "[flags] KEY...")
	f.register(env, fs)
	fs.Int64Var(&cost, "cost", 1, "cost to spend; 0 only reports the state")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if f.keys = fs.Args(); len(f.keys) == 0 {
		usageErrorf(fs, "give at least one key")
		return 2
	}
	base, err := parseBaseURL(f.server)
	if err != nil {
		usageErrorf(fs, "-server: %v", err)
		return 2
	}
	body := apiRequest{Zone: f.zone, Keys: f.keys, Cost: &cost}
	status, raw, err := post(ctx, base+checkPath, f.timeout, body)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice check: %v\n", err)
		return 1
	}
	var d apiDecision
	if err := json.Unmarshal(raw, &d); err != nil {
		fmt.Fprintf(env.Stderr, "sluice check: %s: unreadable answer: %v\n", base+checkPath, err)
		return 1
	}
	if f.json {
		env.Stdout.Write(raw)
	} else {
		d.print(env.Stdout)
	}
	if status == http.StatusTooManyRequests || !d.Allowed {
		return exitDenied
	}
	return 0
}

// apiRequest is the body of POST /v1/check and /v1/reset.
type apiRequest struct {
	Zone string   `json:"zone"`
	Keys []string `json:"keys"`
	Cost *int64   `json:"cost,omitempty"`
}

// apiDecision is the answer of POST /v1/check, 200 or 429.
type apiDecision struct {
	Allowed    bool     `json:"allowed"`
	Zone       string   `json:"zone"`
	Source     string   `json:"source"`
	Shadowed   bool     `json:"shadowed"`
	RetryAfter float64  `json:"retry_after"`
	Limits     []apiHit `json:"limits"`
}

type apiHit struct {
	Key        string  `json:"key"`
	Name       string  `json:"name"`
	Limit      string  `json:"limit"`
	Algorithm  string  `json:"algorithm"`
	Allowed    bool    `json:"allowed"`
	Shadow     bool    `json:"shadow"`
	Used       float64 `json:"used"`
	Remaining  int64   `json:"remaining"`
	RetryAfter float64 `json:"retry_after"`
	ResetAfter float64 `json:"reset_after"`
}

func (d *apiDecision) print(w io.Writer) {
	verdict := "allowed"
	if !d.Allowed {
		verdict = "denied: retry after " + seconds(d.RetryAfter)
	}
	note := ""
	if d.Shadowed {
		note = "; a shadow limit would have denied"
	}
	fmt.Fprintf(w, "%s (zone %s, decided by the %s%s)\n", verdict, d.Zone, d.Source, note)
	if len(d.Limits) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nkey\tlimit\talgorithm\tused\tremaining\tretry after\treset after")
	for _, h := range d.Limits {
		name := h.Limit
		if h.Name != h.Limit {
			name = h.Name + " (" + h.Limit + ")"
		}
		if h.Shadow {
			name += " shadow"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", h.Key, name, h.Algorithm,
			strconv.FormatFloat(h.Used, 'f', -1, 64), h.Remaining, seconds(h.RetryAfter), seconds(h.ResetAfter))
	}
	tw.Flush()
}

// seconds formats a wait given in seconds, such as 0.714 as "714ms".
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// post sends body as JSON to url and returns the status and the body of a
// 2xx or 429 answer. Any other answer is an error quoting the server's
// problem detail.
func post(ctx context.Context, url string, timeout time.Duration, body any) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	data, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: reading the answer: %w", url, err)
	}
	if res.StatusCode/100 == 2 || res.StatusCode == http.StatusTooManyRequests {
		return res.StatusCode, raw, nil
	}
	return 0, nil, fmt.Errorf("%s: %s", url, problemText(res.Status, raw))
}

// problemText renders an error answer: the problem's title and detail
// when it is problem+json, else the start of the body.
func problemText(status string, raw []byte) string {
	var p struct{ Title, Detail string }
	if err := json.Unmarshal(raw, &p); err == nil && (p.Title != "" || p.Detail != "") {
		return strings.TrimSuffix(status+": "+p.Title+": "+p.Detail, ": ")
	}
	body := strings.TrimSpace(string(raw))
	if len(body) > 200 {
		body = body[:200] + "..."
	}
	if body == "" {
		return status
	}
	return status + ": " + body
}

// checkBody returns a builder of the JSON body of POST /v1/check for one
// key, for the load generator: no allocation beyond dst.
func checkBody(zone string, cost int64) func(dst []byte, key string) []byte {
	return func(dst []byte, key string) []byte {
		dst = append(dst, `{"zone":`...)
		dst = appendJSONString(dst, zone)
		dst = append(dst, `,"key":`...)
		dst = appendJSONString(dst, key)
		dst = append(dst, `,"cost":`...)
		dst = strconv.AppendInt(dst, cost, 10)
		return append(dst, '}')
	}
}

// appendJSONString appends s as a JSON string. strconv.Quote is not JSON
// for control and non-ASCII bytes, so anything unusual goes through
// encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
