package sluice

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/ident"
)

// Algorithm names how a limit estimates usage in its sliding window. The zero
// value means SlidingWindow.
type Algorithm string

// The algorithms. Their formulas are in docs/design.md and in package
// internal/algo; the conformance suite holds every store to them.
const (
	// SlidingWindow is Cloudflare's two-counter estimate: the previous fixed
	// window's count weighted by how much of it still overlaps the sliding
	// window, plus the current one. Two integers of state. The default.
	SlidingWindow Algorithm = "sliding-window"
	// Buckets cuts the window into buckets of Limit.Resolution and weights
	// only the oldest, partly covered one. Smaller error, more state.
	Buckets Algorithm = "buckets"
	// Log records every event: exact, with state that grows with the rate
	// (see MaxLogRate).
	Log Algorithm = "log"
	// Decay is an exponentially decayed count (AR1) with time constant
	// Window: one float of state, smooth, a different model of "rate".
	Decay Algorithm = "decay"
	// GCRA is the generic cell rate algorithm with emission interval
	// Window/Rate and a burst of Rate: one timestamp of state, exact for its
	// model.
	GCRA Algorithm = "gcra"
)

// Algorithms returns every algorithm, the default first, in a new slice.
func Algorithms() []Algorithm {
	table := ident.Algos()
	out := make([]Algorithm, len(table))
	for i, a := range table {
		out[i] = Algorithm(a.Name)
	}
	return out
}

// ParseAlgorithm returns the algorithm named s. The empty string is
// SlidingWindow; any unknown name is an error that wraps ErrInvalid.
func ParseAlgorithm(s string) (Algorithm, error) {
	if a, ok := ident.Lookup(s); ok {
		return Algorithm(a.Name), nil
	}
	names := make([]string, 0, 5)
	for _, a := range ident.Algos() {
		names = append(names, a.Name)
	}
	return "", invalid("", "unknown algorithm %q (want one of %s)", s, strings.Join(names, ", "))
}

// MaxLogRate is the largest Rate a Log limit may have, in every store and
// every layer: Limit.Validate refuses more. A log keeps one entry per
// recorded event, so its memory per key and its cost per check grow with
// the rate; above a few thousand events per window an estimating algorithm
// is the better tool.
const MaxLogRate = 10_000

// MaxRate is the largest Rate a Limit may have. Up to it every algorithm
// decides exactly on every store (a fresh limit admits exactly Rate, and
// waiting RetryAfter passes): the integers the Redis scripts compute stay
// below 2^53, where Lua's doubles are exact, and the estimators' rounding
// slack stays far below one unit. Validate and ParseLimit refuse more.
const MaxRate = 1_000_000_000

// MaxWindow is the longest Window a Limit may have (100 years): now plus a
// window, in µs, stays below 2^53.
const MaxWindow = 36500 * 24 * time.Hour

// MaxBuckets is the largest number of buckets per window (Window /
// Resolution) a Buckets limit may have: each check reads every bucket.
const MaxBuckets = 1000

// DefaultBuckets is the number of buckets per window a Buckets limit uses
// when its Resolution is zero.
const DefaultBuckets = 10

// Limit allows at most Rate units of cost per sliding Window.
//
// The zero value is not a valid limit; build one with a literal or with
// ParseLimit. A Limit is a value: copy it freely.
type Limit struct {
	// Name labels the limit in headers, metrics and logs. Optional; the
	// default label is the spec string, such as "10r/m".
	Name string
	// Rate is the cost allowed per Window. Must be > 0.
	Rate int64
	// Window is the length of the sliding window. Must be > 0 and a whole
	// number of microseconds.
	Window time.Duration
	// Algorithm estimates usage. Zero means SlidingWindow.
	Algorithm Algorithm
	// Resolution is the bucket length of a Buckets limit; it must divide
	// Window. Zero means Window/DefaultBuckets. Other algorithms ignore it.
	Resolution time.Duration
	// Shadow makes the limit report what it would deny without denying.
	// See the package doc.
	Shadow bool
}

// Label returns l.Name, or the spec string when the name is empty.
func (l Limit) Label() string {
	if l.Name != "" {
		return l.Name
	}
	return l.String()
}

// String returns the spec string of the limit's rate and window, such as
// "100r/s" or "20r/30s". ParseLimit(l.String()) gives back Rate and Window.
func (l Limit) String() string {
	return strconv.FormatInt(l.Rate, 10) + "r/" + formatPeriod(l.Window)
}

// Algo returns the limit's algorithm, resolving the zero value to
// SlidingWindow.
func (l Limit) Algo() Algorithm {
	if l.Algorithm == "" {
		return SlidingWindow
	}
	return l.Algorithm
}

// Bucket returns the bucket length of a Buckets limit (Resolution, or
// Window/DefaultBuckets when zero) and Window for every other algorithm.
func (l Limit) Bucket() time.Duration {
	if l.Algo() != Buckets {
		return l.Window
	}
	if l.Resolution == 0 {
		return l.Window / DefaultBuckets
	}
	return l.Resolution
}

// Validate reports whether l can be used, in any store. The error wraps
// ErrInvalid and quotes the limit.
func (l Limit) Validate() error {
	// The common case, decided without building the error helper: every
	// algorithm but Buckets and Log needs only these checks.
	if l.Rate > 0 && l.Rate <= MaxRate && l.Window > 0 && l.Window <= MaxWindow && l.Window%time.Microsecond == 0 {
		if a, ok := ident.Lookup(string(l.Algorithm)); ok && !a.Bucketed && (l.Rate <= MaxLogRate || Algorithm(a.Name) != Log) {
			return nil
		}
	}
	return l.validateSlow()
}

// validateSlow is Validate's full path: Buckets limits and every error.
func (l Limit) validateSlow() error {
	bad := func(format string, args ...any) error {
		return invalid(fmt.Sprintf("limit %q", l.String()), format, args...)
	}
	if l.Rate <= 0 {
		return bad("rate must be > 0, got %d", l.Rate)
	}
	if l.Rate > MaxRate {
		return bad("rate must be <= %d (sluice.MaxRate), got %d", int64(MaxRate), l.Rate)
	}
	if l.Window <= 0 {
		return bad("window must be > 0, got %v", l.Window)
	}
	if l.Window > MaxWindow {
		return bad("window must be <= 36500 days (sluice.MaxWindow), got %v", l.Window)
	}
	if l.Window%time.Microsecond != 0 {
		return bad("window must be a whole number of microseconds, got %v", l.Window)
	}
	if _, err := ParseAlgorithm(string(l.Algorithm)); err != nil {
		return bad("unknown algorithm %q", l.Algorithm)
	}
	if l.Algo() == Log && l.Rate > MaxLogRate {
		return bad("a log limit's rate must be <= %d, got %d (use an estimating algorithm for higher rates)", MaxLogRate, l.Rate)
	}
	if l.Algo() != Buckets {
		return nil
	}
	r := l.Bucket()
	switch {
	case r < 0:
		return bad("resolution must be >= 0, got %v", l.Resolution)
	case r < time.Microsecond || r%time.Microsecond != 0:
		return bad("resolution must be a whole number of microseconds, got %v", r)
	case l.Window%r != 0:
		return bad("resolution %v does not divide the window %v", r, l.Window)
	case l.Window/r > MaxBuckets:
		return bad("resolution %v makes %d buckets per window, more than %d", r, l.Window/r, MaxBuckets)
	}
	return nil
}

// ParseLimit parses one spec string: "<rate>r/<period>", where period is s,
// m, h or d (one second, minute, hour or day) or a count with a unit: a Go
// duration such as 30s, 15m or 1h30m, or a number of days such as 2d.
// Examples: "100r/s", "10r/m", "20r/30s", "3r/1h30m". Surrounding spaces are
// ignored. The Algorithm is left zero (SlidingWindow).
//
// Anything else is an error that wraps ErrInvalid and quotes the input.
func ParseLimit(s string) (Limit, error) {
	spec := strings.TrimSpace(s)
	bad := func(why string) (Limit, error) {
		return Limit{}, invalid(fmt.Sprintf("limit %q", s), "%s (want <rate>r/<period>, such as 100r/s, 10r/m or 20r/30s)", why)
	}
	rateText, period, ok := strings.Cut(spec, "r/")
	if !ok {
		return bad(`missing "r/"`)
	}
	rate, err := strconv.ParseInt(rateText, 10, 64)
	if errors.Is(err, strconv.ErrRange) && rateText[0] != '-' && rateText[0] != '+' {
		return bad(fmt.Sprintf("rate %q is out of range: must be <= %d (sluice.MaxRate)", rateText, int64(MaxRate)))
	}
	if err != nil || rateText == "" || rateText[0] == '+' || rateText[0] == '-' {
		return bad(fmt.Sprintf("rate %q is not a positive integer", rateText))
	}
	if rate == 0 {
		return bad("rate must be > 0")
	}
	window, err := parsePeriod(period)
	if err != nil {
		return bad(err.Error())
	}
	l := Limit{Rate: rate, Window: window}
	if err := l.Validate(); err != nil {
		var ie *InvalidError
		errors.As(err, &ie) // Validate returns nothing else
		return bad(ie.Reason)
	}
	return l, nil
}

// ParseLimits parses a comma-separated list of spec strings, such as
// "1r/5s, 5r/h". Empty elements are errors. An error quotes the whole
// input and says which element is wrong.
func ParseLimits(s string) ([]Limit, error) {
	parts := strings.Split(s, ",")
	limits := make([]Limit, 0, len(parts))
	for i, p := range parts {
		if strings.TrimSpace(p) == "" {
			return nil, invalid(fmt.Sprintf("limits %q", s), "element %d is empty (want comma-separated limits such as \"1r/5s, 5r/h\")", i+1)
		}
		l, err := ParseLimit(p)
		if err != nil && len(parts) > 1 {
			return nil, at(fmt.Sprintf("limits %q: element %d", s, i+1), err)
		}
		if err != nil {
			return nil, err
		}
		limits = append(limits, l)
	}
	return limits, nil
}

var unitPeriods = map[string]time.Duration{
	"s": time.Second,
	"m": time.Minute,
	"h": time.Hour,
	"d": 24 * time.Hour,
}

func parsePeriod(p string) (time.Duration, error) {
	if d, ok := unitPeriods[p]; ok {
		return d, nil
	}
	if p == "" {
		return 0, fmt.Errorf("missing period after \"r/\"")
	}
	if p[0] < '0' || p[0] > '9' {
		return 0, fmt.Errorf("period %q must be s, m, h, d or a count with a unit such as 30s", p)
	}
	if days, ok := strings.CutSuffix(p, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if (errors.Is(err, strconv.ErrRange) || err == nil && n > 365*100) && days[0] != '-' && days[0] != '+' {
			return 0, fmt.Errorf("period %q is out of range: must be <= 36500 days (sluice.MaxWindow)", p)
		}
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("period %q: days must be a positive integer", p)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(p)
	if err != nil && durationOverflows(p) {
		return 0, fmt.Errorf("period %q is out of range: must be <= 36500 days (sluice.MaxWindow)", p)
	}
	if err != nil {
		return 0, fmt.Errorf("period %q is not a duration such as 30s, 15m or 1h30m", p)
	}
	if d <= 0 {
		return 0, fmt.Errorf("period %q must be > 0", p)
	}
	return d, nil
}

// durationForm matches what time.ParseDuration accepts, but for its range
// (a positive duration, no sign): a period of this form that it refuses
// is too long, not malformed.
var durationForm = regexp.MustCompile(`^(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// durationOverflows reports whether p is a well-formed duration, such as
// "100000000h", that time.ParseDuration refused: it is longer than about
// 292 years.
func durationOverflows(p string) bool { return durationForm.MatchString(p) }

// formatPeriod is the period part of a limit's spec form: a unit alone for
// exactly one unit ("s", "m", "h", "d"), whole days as "7d", otherwise a
// duration without zero trailing units ("1h30m").
func formatPeriod(w time.Duration) string {
	const day = 24 * time.Hour
	switch w {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	case day:
		return "d"
	}
	if w > 0 && w%day == 0 {
		return strconv.FormatInt(int64(w/day), 10) + "d"
	}
	s := w.String()
	// time.Duration prints 1h30m0s; the spec form drops zero trailing units.
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
