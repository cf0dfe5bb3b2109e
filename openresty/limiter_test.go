package openresty

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// luaLimiter is a sluice.Limiter whose every check and reset is decided by
// the Lua module in nginx (testdata/sluice_harness.lua): the Go side only
// carries the check there and the decision back, so a suite run through it
// tests the module, not Go code.
type luaLimiter struct {
	url    string // nginx's base URL
	redis  string // the module's Redis URL
	prefix string
	now    func() time.Time // nil: Redis's TIME
	edge   bool             // decide behind the edge (deny cache, breaker, policy)
	policy string
	// timeout is the module's Redis timeout in ms (0: the harness's 2000).
	timeout int
	// serverName and verify are the TLS options of a rediss URL.
	serverName string
	verify     bool
	client     *http.Client
}

var _ sluice.Limiter = (*luaLimiter)(nil)

func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256},
	}
}

// encode writes c as the harness reads it.
func (l *luaLimiter) encode(c sluice.Check) string {
	var b strings.Builder
	fmt.Fprintf(&b, "redis x%x\nprefix x%x\n", l.redis, l.prefix)
	if l.now != nil {
		fmt.Fprintf(&b, "now %d\n", l.now().UnixMicro())
	}
	if l.edge {
		b.WriteString("edge 1\n")
	}
	if l.policy != "" {
		fmt.Fprintf(&b, "policy %s\n", l.policy)
	}
	if l.timeout != 0 {
		fmt.Fprintf(&b, "timeout %d\n", l.timeout)
	}
	if l.serverName != "" {
		v := 0
		if l.verify {
			v = 1
		}
		fmt.Fprintf(&b, "tls x%x %d\n", l.serverName, v)
	}
	shadow := 0
	if c.Shadow {
		shadow = 1
	}
	fmt.Fprintf(&b, "cost %d\ngroup x%x\nshadow %d\n", c.Cost, c.Group, shadow)
	for _, h := range c.Hits {
		s := 0
		if h.Limit.Shadow {
			s = 1
		}
		algo := string(h.Limit.Algorithm)
		if algo == "" {
			algo = "sliding-window"
		}
		fmt.Fprintf(&b, "hit x%x x%x %s %d %s %s %d\n", h.Zone, h.Key, algo, h.Limit.Rate,
			micros(h.Limit.Window), micros(h.Limit.Resolution), s)
	}
	return b.String()
}

// micros prints d in µs, with a fraction when it is not whole (which the
// module must refuse).
func micros(d time.Duration) string {
	if d%time.Microsecond == 0 {
		return strconv.FormatInt(d.Microseconds(), 10)
	}
	return strconv.FormatFloat(float64(d)/1e3, 'f', 3, 64)
}

func (l *luaLimiter) post(ctx context.Context, path, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url+path, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	resp, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("nginx answered %s: %s", resp.Status, out)
	}
	return string(out), nil
}

// moduleError turns the module's error text into an error wrapping
// sluice.ErrInvalid, sluice.ErrUnavailable or sluice.ErrBadState, as its
// prefix says.
func moduleError(msg string) error {
	switch {
	case strings.HasPrefix(msg, "sluice: invalid input: "):
		return fmt.Errorf("%w: %s", sluice.ErrInvalid, strings.TrimPrefix(msg, "sluice: invalid input: "))
	case strings.HasPrefix(msg, "sluice: store unavailable: "):
		return fmt.Errorf("%w: %s", sluice.ErrUnavailable, strings.TrimPrefix(msg, "sluice: store unavailable: "))
	case strings.HasPrefix(msg, "sluice: bad stored state: "):
		return fmt.Errorf("%w: %s", sluice.ErrBadState, strings.TrimPrefix(msg, "sluice: bad stored state: "))
	}
	return fmt.Errorf("module: %s", msg)
}

var sources = map[string]sluice.Source{
	"store": sluice.FromStore, "deny-cache": sluice.FromDenyCache, "local-view": sluice.FromLocalView,
	"fail-open": sluice.FromFailOpen, "fail-closed": sluice.FromFailClosed,
}

// Check implements sluice.Limiter.
func (l *luaLimiter) Check(ctx context.Context, c sluice.Check, d *sluice.Decision) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	out, err := l.post(ctx, "/check", l.encode(c))
	if err != nil {
		return err
	}
	return decodeDecision(out, d)
}

// decodeDecision reads the harness's reply into d, and fails when the
// module's own verdict (allowed, shadowed) disagrees with sluice's rule
// applied to its hit results.
func decodeDecision(out string, d *sluice.Decision) error {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() {
		return fmt.Errorf("empty reply")
	}
	head := sc.Text()
	if msg, ok := strings.CutPrefix(head, "err "); ok {
		return moduleError(msg)
	}
	var allowed, shadowed int
	var src string
	var retry int64
	if _, err := fmt.Sscanf(head, "ok %d %d %s %d", &allowed, &shadowed, &src, &retry); err != nil {
		return fmt.Errorf("reply %q: %v", head, err)
	}
	var hits []sluice.HitResult
	for sc.Scan() {
		var a, s int
		var r sluice.HitResult
		var retryAfter, resetAfter int64
		if _, err := fmt.Sscanf(sc.Text(), "hit %d %d %g %d %d %d", &a, &s, &r.Used, &r.Remaining, &retryAfter, &resetAfter); err != nil {
			return fmt.Errorf("reply line %q: %v", sc.Text(), err)
		}
		r.Allowed, r.Shadow = a == 1, s == 1
		r.RetryAfter, r.ResetAfter = time.Duration(retryAfter)*time.Microsecond, time.Duration(resetAfter)*time.Microsecond
		hits = append(hits, r)
	}
	source, ok := sources[src]
	if !ok {
		return fmt.Errorf("unknown source %q", src)
	}
	if len(hits) == 0 {
		d.Degrade(source, allowed == 1, time.Duration(retry)*time.Microsecond)
		return nil
	}
	d.Prepare(len(hits))
	copy(d.Hits, hits)
	d.Conclude(source)
	if d.Allowed != (allowed == 1) || d.Shadowed != (shadowed == 1) {
		return fmt.Errorf("module said allowed=%d shadowed=%d, its hits say %v %v", allowed, shadowed, d.Allowed, d.Shadowed)
	}
	if got := d.RetryAfter().Microseconds(); got != retry {
		return fmt.Errorf("module's retry_after %dµs, its hits say %dµs", retry, got)
	}
	return nil
}

// Reset implements sluice.Limiter.
func (l *luaLimiter) Reset(ctx context.Context, c sluice.Check) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	out, err := l.post(ctx, "/reset", l.encode(c))
	if err != nil {
		return err
	}
	out = strings.TrimSpace(out)
	if msg, ok := strings.CutPrefix(out, "err "); ok {
		return moduleError(msg)
	}
	if out != "ok" {
		return fmt.Errorf("reset reply %q", out)
	}
	return nil
}

var _ = hex.EncodeToString
