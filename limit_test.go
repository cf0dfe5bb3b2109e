package sluice

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/ident"
)

func TestParseLimit(t *testing.T) {
	cases := []struct {
		in     string
		rate   int64
		window time.Duration
	}{
		{"100r/s", 100, time.Second},
		{"10r/m", 10, time.Minute},
		{"5r/h", 5, time.Hour},
		{"1000r/d", 1000, 24 * time.Hour},
		{"20r/30s", 20, 30 * time.Second},
		{"3r/1h30m", 3, 90 * time.Minute},
		{"15r/15m", 15, 15 * time.Minute},
		{"2r/2d", 2, 48 * time.Hour},
		{"1r/500ms", 1, 500 * time.Millisecond},
		{"1r/1.5s", 1, 1500 * time.Millisecond},
		{"1r/1us", 1, time.Microsecond},
		{"7r/90s", 7, 90 * time.Second},
		{"  10r/m\t", 10, time.Minute},
		{"010r/m", 10, time.Minute},
		{"1000000000r/s", MaxRate, time.Second},
	}
	for _, c := range cases {
		l, err := ParseLimit(c.in)
		if err != nil {
			t.Errorf("ParseLimit(%q): %v", c.in, err)
			continue
		}
		want := Limit{Rate: c.rate, Window: c.window}
		if l != want {
			t.Errorf("ParseLimit(%q) = %+v, want %+v", c.in, l, want)
		}
		if l.Algo() != SlidingWindow {
			t.Errorf("ParseLimit(%q).Algo() = %q, want sliding-window", c.in, l.Algo())
		}
	}
}

func TestParseLimitErrors(t *testing.T) {
	cases := []struct {
		in, why string // why: a fragment the error must contain
	}{
		{"", `missing "r/"`},
		{"   ", `missing "r/"`},
		{"10", `missing "r/"`},
		{"10r", `missing "r/"`},
		{"10R/m", `missing "r/"`},
		{"10/m", `missing "r/"`},
		{"10 per minute", `missing "r/"`},
		{"r/m", "not a positive integer"},
		{"0r/m", "rate must be > 0"},
		{"-1r/m", "not a positive integer"},
		{"+1r/m", "not a positive integer"},
		{"1.5r/m", "not a positive integer"},
		{"1e3r/s", "not a positive integer"},
		{"10 r/m", "not a positive integer"},
		{"99999999999999999999r/s", `rate "99999999999999999999" is out of range: must be <= 1000000000`},
		{"1000000001r/s", "rate must be <= 1000000000 (sluice.MaxRate)"},
		{"9223372036854775807r/d", "rate must be <= 1000000000 (sluice.MaxRate)"},
		{"10r/", "missing period"},
		{"10r/x", "must be s, m, h, d or a count"},
		{"10r/ m", "must be s, m, h, d or a count"},
		{"10r/mm", "must be s, m, h, d or a count"},
		{"10r/min", "must be s, m, h, d or a count"},
		{"10r/-1s", "must be s, m, h, d or a count"},
		{"10r/s/s", "must be s, m, h, d or a count"},
		{"10r/r/m", "must be s, m, h, d or a count"},
		{"10r/0s", "must be > 0"},
		{"10r/0d", "days must be a positive integer"},
		{"10r/1.5d", "days must be a positive integer"},
		{"10r/99999d", `period "99999d" is out of range: must be <= 36500 days`},
		{"10r/99999999999999999999d", "is out of range: must be <= 36500 days"},
		{"10r/30", "not a duration"},
		{"10r/1h30", "not a duration"},
		{"10r/1y", "not a duration"},
		{"10r/9999999999h", `period "9999999999h" is out of range: must be <= 36500 days`},
		{"1r/100000000h", "is out of range: must be <= 36500 days"},
		{"1r/1.5.h", "not a duration"},
		{"1r/5.h.", "not a duration"},
		{"1r/100ns", "whole number of microseconds"},
		{"1r/1500ns", "whole number of microseconds"},
	}
	for _, c := range cases {
		l, err := ParseLimit(c.in)
		if err == nil {
			t.Errorf("ParseLimit(%q) = %+v, want an error", c.in, l)
			continue
		}
		msg := err.Error()
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseLimit(%q): %v does not wrap ErrInvalid", c.in, err)
		}
		if !strings.Contains(msg, fmt.Sprintf("%q", c.in)) {
			t.Errorf("ParseLimit(%q): error %q does not quote the input", c.in, msg)
		}
		if !strings.Contains(msg, c.why) {
			t.Errorf("ParseLimit(%q): error %q does not say %q", c.in, msg, c.why)
		}
		if !strings.Contains(msg, "want <rate>r/<period>") {
			t.Errorf("ParseLimit(%q): error %q does not say what was expected", c.in, msg)
		}
	}
}

func TestParseLimits(t *testing.T) {
	got, err := ParseLimits("1r/5s, 5r/h,100r/d")
	if err != nil {
		t.Fatal(err)
	}
	want := []Limit{{Rate: 1, Window: 5 * time.Second}, {Rate: 5, Window: time.Hour}, {Rate: 100, Window: 24 * time.Hour}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ParseLimits = %v, want %v", got, want)
	}
	for _, in := range []string{"", ",", "1r/5s,", ",1r/5s", "1r/5s,,5r/h", "1r/5s, 5r/x", "1r/5s; 5r/h"} {
		if l, err := ParseLimits(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseLimits(%q) = %v, %v; want ErrInvalid", in, l, err)
		} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("ParseLimits(%q): error %q does not quote the input", in, err)
		}
	}
}

func TestLimitStringRoundTrip(t *testing.T) {
	for _, spec := range []string{
		"100r/s", "10r/m", "5r/h", "1000r/d", "20r/30s", "3r/1h30m", "2r/2d",
		"1r/500ms", "1r/1.5s", "1r/1µs", "4r/90s", "4r/36h", "4r/2h", "4r/1h0m30s", "4r/10m0.5s",
	} {
		l, err := ParseLimit(spec)
		if err != nil {
			t.Fatalf("ParseLimit(%q): %v", spec, err)
		}
		s := l.String()
		back, err := ParseLimit(s)
		if err != nil || back != l {
			t.Errorf("%q: String() = %q, which parses to %+v, %v", spec, s, back, err)
		}
	}
	for _, c := range []struct {
		l    Limit
		want string
	}{
		{Limit{Rate: 10, Window: time.Minute}, "10r/m"},
		{Limit{Rate: 3, Window: 90 * time.Minute}, "3r/1h30m"},
		{Limit{Rate: 1, Window: 48 * time.Hour}, "1r/2d"},
		{Limit{Rate: 1, Window: 2 * time.Hour}, "1r/2h"},
		{Limit{Rate: 1, Window: 2 * time.Minute}, "1r/2m"},
		{Limit{Rate: 20, Window: 30 * time.Second}, "20r/30s"},
	} {
		if got := c.l.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.l, got, c.want)
		}
	}
}

func TestLimitLabelAndBucket(t *testing.T) {
	l := Limit{Rate: 10, Window: time.Minute}
	if got := l.Label(); got != "10r/m" {
		t.Errorf("Label() = %q, want the spec string", got)
	}
	l.Name = "api"
	if got := l.Label(); got != "api" {
		t.Errorf("Label() = %q, want the name", got)
	}
	if got := l.Bucket(); got != time.Minute {
		t.Errorf("sliding-window Bucket() = %v, want the window", got)
	}
	l.Algorithm = Buckets
	if got := l.Bucket(); got != 6*time.Second {
		t.Errorf("buckets Bucket() = %v, want Window/DefaultBuckets", got)
	}
	l.Resolution = 15 * time.Second
	if got := l.Bucket(); got != 15*time.Second {
		t.Errorf("buckets Bucket() = %v, want the resolution", got)
	}
}

func TestLimitValidate(t *testing.T) {
	ok := []Limit{
		{Rate: 1, Window: time.Second},
		{Rate: 1, Window: time.Minute, Algorithm: Buckets, Resolution: time.Second},
		{Rate: 1, Window: time.Minute, Algorithm: Buckets, Resolution: 60 * time.Millisecond},
		{Rate: 1, Window: time.Minute, Algorithm: Log, Resolution: 7 * time.Second}, // ignored
		{Rate: 1, Window: time.Microsecond},
	}
	for _, l := range ok {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
	bad := []struct {
		l   Limit
		why string
	}{
		{Limit{Window: time.Second}, "rate must be > 0"},
		{Limit{Rate: -1, Window: time.Second}, "rate must be > 0"},
		{Limit{Rate: 1}, "window must be > 0"},
		{Limit{Rate: 1, Window: -time.Second}, "window must be > 0"},
		{Limit{Rate: 1, Window: 1500 * time.Nanosecond}, "whole number of microseconds"},
		{Limit{Rate: 1, Window: time.Second, Algorithm: "leaky"}, `unknown algorithm "leaky"`},
		{Limit{Rate: 1, Window: time.Minute, Algorithm: Buckets, Resolution: 7 * time.Second}, "does not divide the window"},
		{Limit{Rate: 1, Window: time.Minute, Algorithm: Buckets, Resolution: -time.Second}, "resolution must be >= 0"},
		{Limit{Rate: 1, Window: time.Minute, Algorithm: Buckets, Resolution: 2 * time.Minute}, "does not divide the window"},
		{Limit{Rate: 1, Window: time.Minute, Algorithm: Buckets, Resolution: 1500 * time.Nanosecond}, "whole number of microseconds"},
		{Limit{Rate: 1, Window: time.Minute, Algorithm: Buckets, Resolution: time.Millisecond}, "more than 1000"},
		{Limit{Rate: 1, Window: 5 * time.Microsecond, Algorithm: Buckets}, "whole number of microseconds"},
	}
	for _, c := range bad {
		err := c.l.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%+v: Validate() = %v, want ErrInvalid saying %q", c.l, err, c.why)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", c.l.String())) {
			t.Errorf("%+v: error %q does not quote the limit", c.l, err)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	for _, a := range Algorithms() {
		if got, err := ParseAlgorithm(string(a)); err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %q, %v", a, got, err)
		}
	}
	if got, err := ParseAlgorithm(""); err != nil || got != SlidingWindow {
		t.Errorf("ParseAlgorithm(\"\") = %q, %v; want the default", got, err)
	}
	for _, s := range []string{"Log", "sliding_window", "token-bucket", " log"} {
		if _, err := ParseAlgorithm(s); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
			t.Errorf("ParseAlgorithm(%q): %v, want ErrInvalid quoting the input", s, err)
		}
	}
}

// TestAlgorithmsAreTheTable: the exported constants, Algorithms and
// ParseAlgorithm name exactly internal/ident's table, in its order.
func TestAlgorithmsAreTheTable(t *testing.T) {
	consts := []Algorithm{SlidingWindow, Buckets, Log, Decay, GCRA}
	table := ident.Algos()
	if got := Algorithms(); len(got) != len(table) || len(consts) != len(table) {
		t.Fatalf("Algorithms() = %v, %d constants, table has %d", got, len(consts), len(table))
	}
	for i, a := range table {
		if got := Algorithms()[i]; string(got) != a.Name || consts[i] != got {
			t.Errorf("algorithm %d: Algorithms() has %q, constant %q, table %q", i, got, consts[i], a.Name)
		}
		if got, err := ParseAlgorithm(a.Name); err != nil || string(got) != a.Name {
			t.Errorf("ParseAlgorithm(%q) = %q, %v", a.Name, got, err)
		}
		l := Limit{Rate: 10, Window: time.Minute, Algorithm: Algorithm(a.Name)}
		if got := l.Bucket() != l.Window; got != a.Bucketed {
			t.Errorf("%s: Bucket() differs from Window: %v, want %v (Bucketed)", a.Name, got, a.Bucketed)
		}
	}
}

// TestInvalidErrorSaysItOnce: a limit that parses but does not validate,
// alone or in a list, is one *InvalidError whose text carries the
// package's prefix once (it was doubled: `limit "1r/1500ns": sluice:
// invalid input: limit ...`), with a field and a reason a client can be
// shown as they are.
func TestInvalidErrorSaysItOnce(t *testing.T) {
	for _, tt := range []struct {
		name, where, field string
		parse              func() error
	}{
		{"ParseLimit", "", `limit "1r/1500ns"`, func() error { _, err := ParseLimit("1r/1500ns"); return err }},
		{"ParseLimits", `limits "1r/s, 1r/1500ns": element 2`, `limit " 1r/1500ns"`, func() error { _, err := ParseLimits("1r/s, 1r/1500ns"); return err }},
		{"Check.Validate", "hit 0", `limit "1r/1.5µs"`, func() error {
			return Check{Hits: []Hit{{Key: "k", Limit: Limit{Rate: 1, Window: 1500}}}, Cost: 1}.Validate()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.parse()
			var ie *InvalidError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ie) {
				t.Fatalf("error %v: want an *InvalidError that Is ErrInvalid", err)
			}
			if n := strings.Count(err.Error(), "invalid input"); n != 1 {
				t.Errorf("%q says %q %d times", err, "invalid input", n)
			}
			if ie.Where != tt.where || ie.Field != tt.field || !strings.HasPrefix(ie.Reason, "window must be a whole number of microseconds") {
				t.Errorf("Where %q, Field %q, Reason %q; want %q, %q and the window's reason", ie.Where, ie.Field, ie.Reason, tt.where, tt.field)
			}
			if got, want := ie.Detail(false), tt.field+": "+ie.Reason; got != want {
				t.Errorf("Detail(false) = %q, want %q", got, want)
			}
		})
	}
}
