package sluice

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// FuzzParseLimit: the parser never panics; every error wraps ErrInvalid and
// quotes the input; every limit it returns is valid, and its String parses
// back to the same limit.
func FuzzParseLimit(f *testing.F) {
	for _, seed := range []string{
		"100r/s", "10r/m", "5r/h", "1000r/d", "20r/30s", "3r/1h30m", "2r/2d", "1r/500ms",
		"1r/1.5s", "1r/1µs", " 10r/m ", "0r/m", "-1r/m", "10r/", "r/m", "10r/x", "10r/0s",
		"1r/100ns", "10r/99999d", "99999999999999999999r/s", "1r/5s, 5r/h", "10r/r/m", "\xffr/s",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		l, err := ParseLimit(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseLimit(%q): %v does not wrap ErrInvalid", in, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
				t.Fatalf("ParseLimit(%q): error %q does not quote the input", in, err)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("ParseLimit(%q) = %+v, which is invalid: %v", in, l, err)
		}
		back, err := ParseLimit(l.String())
		if err != nil || back != l {
			t.Fatalf("ParseLimit(%q) = %+v; its String %q parses to %+v, %v", in, l, l.String(), back, err)
		}
		if _, err := ParseLimits(in); err != nil && !strings.Contains(in, ",") {
			t.Fatalf("ParseLimits(%q) fails (%v) where ParseLimit succeeds", in, err)
		}
	})
}
