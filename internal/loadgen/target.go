package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// MaxKeys is the largest key space Keys accepts: the keys are generated up
// front, about 30 bytes each.
const MaxKeys = 10_000_000

// Keys is a key space shared by the workers: N keys named "bench-0",
// "bench-1", ... and a share Hot of operations that all go to "bench-0".
// The rest are spread uniformly over all N. It is read-only once built and
// safe for concurrent use.
type Keys struct {
	keys []string
	hot  float64
}

// NewKeys returns a key space of n keys (1 to MaxKeys) with a hot share
// (0 to 1).
func NewKeys(n int, hot float64) (*Keys, error) {
	if n < 1 || n > MaxKeys {
		return nil, fmt.Errorf("loadgen: key count must be 1 to %d, got %d", MaxKeys, n)
	}
	if !(hot >= 0 && hot <= 1) {
		return nil, fmt.Errorf("loadgen: hot share must be 0 to 1, got %v", hot)
	}
	k := &Keys{keys: make([]string, n), hot: hot}
	for i := range k.keys {
		k.keys[i] = "bench-" + strconv.Itoa(i)
	}
	return k, nil
}

// Len returns the number of keys.
func (k *Keys) Len() int { return len(k.keys) }

// Picker returns a per-worker key picker seeded by worker, so runs are
// reproducible per worker. Not safe for concurrent use.
func (k *Keys) Picker(worker int) func() string {
	r := rand.New(rand.NewPCG(uint64(worker), 0x5eed))
	n := uint64(len(k.keys))
	return func() string {
		if k.hot > 0 && r.Float64() < k.hot {
			return k.keys[0]
		}
		return k.keys[r.Uint64N(n)]
	}
}

// StoreOp returns an Op that checks cost on limits for a key from pick, in
// zone, directly on a Limiter. A check that returns an error is Failed.
func StoreOp(l sluice.Limiter, zone string, limits []sluice.Limit, cost int64, pick func() string) Op {
	hits := make([]sluice.Hit, len(limits))
	for i, lim := range limits {
		hits[i] = sluice.Hit{Zone: zone, Limit: lim}
	}
	var d sluice.Decision
	return func(ctx context.Context, _ uint64) (Result, error) {
		key := pick()
		for i := range hits {
			hits[i].Key = key
		}
		if err := l.Check(ctx, sluice.Check{Hits: hits, Cost: cost}, &d); err != nil {
			return Failed, err
		}
		if d.Allowed {
			return Allowed, nil
		}
		return Denied, nil
	}
}

// HTTPRequest describes the request an HTTPOp sends.
type HTTPRequest struct {
	// Method is the HTTP method. Default GET, or POST when Body is set.
	Method string
	// URL is the target. Each "{key}" in it is replaced by the request's
	// key (query-escaped), so a GET target can spread its requests over
	// keys: http://127.0.0.1:8000/?k={key}.
	URL string
	// ContentType is sent with a body. Default application/json.
	ContentType string
	// Body appends the body for a key to dst; nil sends no body.
	Body func(dst []byte, key string) []byte
}

// HTTPOp returns an Op that sends req with client, for a key from pick,
// and reads the whole response so the connection is reused. 2xx is
// Allowed, 429 is Denied, anything else Failed with the status and the
// start of the body.
func HTTPOp(client *http.Client, req HTTPRequest, pick func() string) Op {
	method := req.Method
	if method == "" {
		method = http.MethodGet
		if req.Body != nil {
			method = http.MethodPost
		}
	}
	ctype := req.ContentType
	if ctype == "" {
		ctype = "application/json"
	}
	var buf []byte
	var body bytes.Reader
	keyed := strings.Contains(req.URL, "{key}")
	return func(ctx context.Context, _ uint64) (Result, error) {
		var key string
		if req.Body != nil || keyed {
			key = pick()
		}
		target := req.URL
		if keyed {
			target = strings.ReplaceAll(target, "{key}", url.QueryEscape(key))
		}
		var rd io.Reader
		if req.Body != nil {
			buf = req.Body(buf[:0], key)
			body.Reset(buf)
			rd = &body
		}
		r, err := http.NewRequestWithContext(ctx, method, target, rd)
		if err != nil {
			return Failed, err
		}
		if rd != nil {
			r.Header["Content-Type"] = []string{ctype}
		}
		res, err := client.Do(r)
		if err != nil {
			return Failed, err
		}
		return classify(res)
	}
}

func classify(res *http.Response) (Result, error) {
	defer res.Body.Close()
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		_, err := io.Copy(io.Discard, res.Body)
		return Allowed, err
	case res.StatusCode == http.StatusTooManyRequests:
		_, err := io.Copy(io.Discard, res.Body)
		return Denied, err
	}
	head, _ := io.ReadAll(io.LimitReader(res.Body, 200))
	io.Copy(io.Discard, res.Body)
	return Failed, fmt.Errorf("status %d: %s", res.StatusCode, bytes.TrimSpace(head))
}

// NewHTTPClient returns a client for conns keep-alive connections to one
// host, so every worker keeps its connection instead of opening new ones,
// and with a timeout on every request.
func NewHTTPClient(conns int, timeout time.Duration) *http.Client {
	t := &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: t, Timeout: timeout}
}
