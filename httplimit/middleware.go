package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpfields"
)

// Options configure a Middleware. The zero value limits each client
// address with a 429 on denial.
type Options struct {
	// Key derives the key a request is counted against. Default
	// ClientAddr(nil): the connection's peer address.
	Key KeyFunc
	// Zone is the namespace of the keys (sluice.Hit.Zone). Two middlewares
	// with different zones never share state. Default "".
	Zone string
	// Group co-locates the state of every hit of a check (sluice.Check.Group).
	// Default "": each hit is placed by its key.
	Group string
	// Cost is what one request spends, >= 1 and no more than any limit's
	// Rate. Default 1.
	Cost int64
	// DenyStatus is the status of a denied request. nginx auth_request
	// passes only 401 and 403 through, so an auth endpoint uses 403 and
	// nginx turns it into 429 (see examples/nginx.conf). Default 429.
	DenyStatus int
	// OmitAllowedFields leaves the RateLimit-Policy and RateLimit fields
	// off allowed responses; denied ones always carry them. Default false:
	// every response carries them.
	OmitAllowedFields bool
	// OnError answers a request the limiter could not decide, and one
	// with no key. Default: 400 with a problem+json body for ErrNoKey and
	// sluice.ErrInvalid, 503 for everything else (a store error, a
	// timeout). To let requests through while the store is down, wrap the
	// limiter in a failure policy (package edge) rather than here: then
	// Check returns a degraded decision, not an error.
	OnError func(w http.ResponseWriter, r *http.Request, err error)
	// Logger receives a warning for every request the limiter could not
	// decide. Default: discard.
	Logger *slog.Logger
}

// Middleware holds a set of limits over net/http handlers. Every request
// through Wrap's handler is one check of Cost on every limit, for the key
// of the request. It is safe for concurrent use.
type Middleware struct {
	limiter sluice.Limiter
	limits  []sluice.Limit
	opts    Options
	// policy is the RateLimit-Policy value: it depends only on the limits.
	// Its capacity equals its length, so a handler that appends to the
	// header reallocates instead of writing into the shared array.
	policy []string
	// labels are the limits' names in the RateLimit fields (their labels,
	// made unique), and items the same encoded as Structured Field
	// Strings.
	labels, items []string
	pool          sync.Pool
}

// state is the per-request storage the middleware pools: the check's
// hits, its decision and a buffer for field values.
type state struct {
	hits     []sluice.Hit
	d        sluice.Decision
	buf      []byte
	violated []string
}

// New returns a middleware that checks limits on limiter. limits must
// hold 1 to sluice.MaxHits valid limits that do not share state, whose
// names are printable ASCII (the RateLimit fields carry them). The error
// wraps sluice.ErrInvalid and says what is wrong.
func New(limiter sluice.Limiter, limits []sluice.Limit, opts Options) (*Middleware, error) {
	if limiter == nil {
		return nil, fmt.Errorf("httplimit: %w: nil limiter", sluice.ErrInvalid)
	}
	if opts.Key == nil {
		opts.Key = ClientAddr(nil)
	}
	if opts.Cost == 0 {
		opts.Cost = 1
	}
	if opts.Cost < 0 {
		return nil, fmt.Errorf("httplimit: %w: cost must be >= 1, got %d", sluice.ErrInvalid, opts.Cost)
	}
	if opts.DenyStatus == 0 {
		opts.DenyStatus = http.StatusTooManyRequests
	}
	if opts.DenyStatus < 400 || opts.DenyStatus > 599 {
		return nil, fmt.Errorf("httplimit: %w: deny status must be 4xx or 5xx, got %d", sluice.ErrInvalid, opts.DenyStatus)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	for i, l := range limits {
		if !httpfields.SFSafe(l.Name) {
			return nil, fmt.Errorf("httplimit: %w: limits[%d]: name %q: use printable ASCII, which the RateLimit fields carry", sluice.ErrInvalid, i, l.Name)
		}
	}
	m := &Middleware{limiter: limiter, limits: append([]sluice.Limit(nil), limits...), opts: opts}
	probe := sluice.Check{Hits: m.hits("key"), Cost: opts.Cost, Group: opts.Group}
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("httplimit: %w", err)
	}
	if v := httpfields.AppendPolicy(nil, probe); len(v) > 0 {
		m.policy = []string{string(v)}
	}
	var buf [sluice.MaxHits]string
	for _, id := range httpfields.FieldIDs(&buf, probe) {
		m.labels = append(m.labels, id)
		m.items = append(m.items, string(httpfields.AppendSFString(nil, id)))
	}
	m.pool.New = func() any { return &state{hits: m.hits("")} }
	return m, nil
}

func (m *Middleware) hits(key string) []sluice.Hit {
	hits := make([]sluice.Hit, len(m.limits))
	for i, l := range m.limits {
		hits[i] = sluice.Hit{Zone: m.opts.Zone, Key: key, Limit: l}
	}
	return hits
}

// Wrap returns a handler that checks every request before passing it to
// next. A denied request gets DenyStatus with Retry-After, the RateLimit
// fields and a quota-exceeded problem body, and never reaches next. An
// allowed one reaches next with the RateLimit fields already set (unless
// OmitAllowedFields).
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.Allow(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// Allow checks r and reports whether it may proceed. When it returns
// false it has written the whole response (a denial or an error); when it
// returns true it has only set the RateLimit fields on w's header, and the
// caller writes the response. Wrap is Allow followed by next.
func (m *Middleware) Allow(w http.ResponseWriter, r *http.Request) bool {
	key, err := m.opts.Key(r)
	if err != nil {
		m.fail(w, r, err)
		return false
	}
	if len(key) > sluice.MaxKeyLen {
		m.fail(w, r, fmt.Errorf("httplimit: %w: key of %d bytes is longer than %d", ErrNoKey, len(key), sluice.MaxKeyLen))
		return false
	}
	s := m.pool.Get().(*state)
	defer m.release(s)
	for i := range s.hits {
		s.hits[i].Key = key
	}
	c := sluice.Check{Hits: s.hits, Cost: m.opts.Cost, Group: m.opts.Group}
	if err := m.limiter.Check(r.Context(), c, &s.d); err != nil {
		m.fail(w, r, err)
		return false
	}
	if !s.d.Allowed {
		m.deny(w, c, s)
		return false
	}
	if !m.opts.OmitAllowedFields {
		m.setFields(w.Header(), c, s)
	}
	return true
}

func (m *Middleware) release(s *state) {
	for i := range s.hits {
		s.hits[i].Key = ""
	}
	clear(s.violated)
	m.pool.Put(s)
}

func (m *Middleware) setFields(h http.Header, c sluice.Check, s *state) {
	if m.policy != nil {
		h[httpfields.FieldPolicy] = m.policy
	}
	s.buf = httpfields.AppendRateLimitItems(s.buf[:0], c, &s.d, m.items)
	if len(s.buf) > 0 {
		h[httpfields.FieldRateLimit] = []string{string(s.buf)}
	}
}

func (m *Middleware) deny(w http.ResponseWriter, c sluice.Check, s *state) {
	h := w.Header()
	m.setFields(h, c, s)
	s.buf = appendRetryAfter(s.buf[:0], &s.d)
	h[httpfields.FieldRetryAfter] = []string{string(s.buf)}
	p := httpfields.DeniedProblem(m.opts.DenyStatus, c, &s.d, s.violated, m.labels)
	s.violated = p.ViolatedPolicies
	s.buf = httpfields.WriteProblemBuf(w, &p, s.buf)
}

func appendRetryAfter(dst []byte, d *sluice.Decision) []byte {
	return httpfields.AppendParam(dst, "", httpfields.RetryAfterSeconds(d))
}

func (m *Middleware) fail(w http.ResponseWriter, r *http.Request, err error) {
	if m.opts.OnError != nil {
		m.opts.OnError(w, r, err)
		return
	}
	if errors.Is(err, ErrNoKey) || errors.Is(err, sluice.ErrInvalid) {
		WriteProblem(w, &Problem{Title: "Bad Request", Status: http.StatusBadRequest, Detail: err.Error()})
		return
	}
	if !errors.Is(err, context.Canceled) {
		m.opts.Logger.LogAttrs(r.Context(), slog.LevelWarn, "httplimit: could not decide",
			slog.String("zone", m.opts.Zone), slog.String("error", err.Error()))
	}
	WriteProblem(w, &Problem{
		Title:  "Service Unavailable",
		Status: http.StatusServiceUnavailable,
		Detail: "the rate limiter could not decide; retry later",
	})
}
