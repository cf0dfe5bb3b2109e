package cli

import (
	"unicode"
	"unicode/utf8"

	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"github.com/sluicehq/sluice/internal/top"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/server"
)

var topCommand = command{
	name:    "top",
	summary: "show who a running server is limiting, refreshed (GET /v1/top)",
	run:     runTop,
}

// topFlags are the flags of "sluice top".
type topFlags struct {
	server   string
	zone     string
	n        int
	interval time.Duration
	timeout  time.Duration
	once     bool
	json     bool
}

func runTop(ctx context.Context, env Env, args []string) int {
	var f topFlags
	fs := newFlagSet(env, "top", "[flags]")
	fs.StringVar(&f.server, "server", "", "base `URL` of the server's admin listener (default $SLUICE_SERVER, else "+defaultServer+"); the admin token is $SLUICE_ADMIN_TOKEN")
	fs.StringVar(&f.zone, "zone", "", "show this zone only (default: every zone and rate-limit domain)")
	fs.IntVar(&f.n, "n", 5, "keys per list, 1 to 64")
	fs.DurationVar(&f.interval, "interval", 2*time.Second, "time between refreshes")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "timeout of each request")
	fs.BoolVar(&f.once, "once", false, "print once and exit, without clearing the screen")
	fs.BoolVar(&f.json, "json", false, "print the server's JSON once and exit")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	switch {
	case fs.NArg() > 0:
		return parseExit(usageErrorf(fs, "unexpected argument %q", fs.Arg(0)))
	case f.n < 1 || f.n > 64:
		return parseExit(usageErrorf(fs, "-n: want 1 to 64"))
	case f.interval < 100*time.Millisecond:
		return parseExit(usageErrorf(fs, "-interval: want at least 100ms"))
	}
	base, err := parseBaseURL(cmp.Or(f.server, env.Getenv("SLUICE_SERVER"), defaultServer))
	if err != nil {
		return parseExit(usageErrorf(fs, "-server: %v", err))
	}
	q := url.Values{"n": {strconv.Itoa(f.n)}}
	if f.zone != "" {
		q.Set("zone", f.zone)
	}
	u := base + "/v1/top?" + q.Encode()
	token := env.Getenv("SLUICE_ADMIN_TOKEN")
	clear := !f.once && !f.json && isTerminal(env.Stdout)
	for {
		raw, err := getTop(ctx, u, f.timeout, token)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sluice top: %v\n", err)
			if f.once || f.json || ctx.Err() != nil {
				return 1
			}
		} else if f.json {
			env.Stdout.Write(raw)
			return 0
		} else {
			var rep server.TopReport
			if err := json.Unmarshal(raw, &rep); err != nil {
				fmt.Fprintf(env.Stderr, "sluice top: %s: %v\n", u, err)
				return 1
			}
			if clear {
				io.WriteString(env.Stdout, "\x1b[H\x1b[2J")
			}
			writeTop(env.Stdout, &rep, base)
			if f.once {
				return 0
			}
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(f.interval):
		}
	}
}

func getTop(ctx context.Context, u string, timeout time.Duration, token string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer: %w", u, err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", u, problemText(res.Status, raw))
	}
	return raw, nil
}

// writeTop renders a report as text: the store, then per zone its rates
// and lists.
func writeTop(w io.Writer, rep *server.TopReport, base string) {
	st := rep.Store
	fmt.Fprintf(w, "sluice top  %s  %s\n", base, rep.Now.Local().Format("15:04:05"))
	fmt.Fprintf(w, "store %s", st.Kind)
	if st.Breaker != "" {
		fmt.Fprintf(w, "  breaker %s (opened %d)", st.Breaker, st.BreakerOpens)
	}
	fmt.Fprintf(w, "  errors %d  timeouts %d  deny-cache hits %d\n", st.Errors, st.Timeouts, st.DenyCacheHit)
	for _, a := range st.Async {
		fmt.Fprintf(w, "async %s/%s: backlog %d cost over %d keys, view age %.2fs\n", a.Policy, a.SyncInterval, a.Pending, a.Keys, a.ViewAge)
	}
	for _, z := range rep.Zones {
		fmt.Fprintf(w, "\n%s  %s  allowed %.1f/s  denied %.1f/s  shadow-denied %.1f/s  (lists over %s)\n",
			z.Name, cmp.Or(strings.Join(z.Limits, ", "), z.Kind), z.Rates.Allowed, z.Rates.Denied, z.Rates.ShadowDenied, z.Window.Round(time.Second))
		if z.Sampling > 1 {
			fmt.Fprintf(w, "  flood: 1 check in %d observed, counts and rates estimated\n", z.Sampling)
		}
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		row := func(list, key, count, extra string) { fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", list, key, count, extra) }
		row("LIST", "KEY", "COUNT", "")
		flood := z.Sampling > 1
		for _, k := range z.Denied {
			extra := "denied for " + rep.Now.Sub(k.Since).Round(time.Second).String()
			if k.Shadow {
				extra += " (shadow)"
			}
			row("denied", termSafe(cmp.Or(k.Key, k.ID)), countText(k, flood), extra)
		}
		for _, k := range z.Near {
			row("near", termSafe(cmp.Or(k.Key, k.ID)), countText(k, flood), fmt.Sprintf("peak %.0f%%", k.Usage*100))
		}
		for _, k := range z.Admitted {
			row("admitted", termSafe(cmp.Or(k.Key, k.ID)), countText(k, flood || z.Sample > 1), "")
		}
		tw.Flush()
	}
}

// countText is a listed count as what it guarantees: the true count lies
// between Count - Error and Count (Space-Saving), shown as "LOW-HIGH"
// when Error is not 0, so that a key denied once that took over a
// counter of 43 shows "1-44", not 44; prefixed with "~" when the list is
// sampled (the admitted list, one allowed check in top.sample; any list
// under a flood), where the count is an estimate.
func countText(k top.Key, sampled bool) string {
	s := strconv.FormatInt(k.Count, 10)
	if k.Error > 0 {
		s = strconv.FormatInt(k.Count-k.Error, 10) + "-" + s
	}
	if sampled {
		s = "~" + s
	}
	return s
}

// termSafe returns s as a terminal shows it harmlessly: as it is when
// every rune is printable (no control character, no newline, no format
// character such as a bidirectional override, valid UTF-8), otherwise
// quoted with Go escapes ("\x1b[2J\n..."), so that a client-chosen key
// can neither drive the operator's terminal nor forge a row.
func termSafe(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || r == '"' || r == '\\' || !unicode.IsPrint(r) {
			return strconv.QuoteToGraphic(s)
		}
	}
	return s
}
