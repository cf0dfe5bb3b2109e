package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// hostileKeys are (zone, key) pairs that a careless encoding would merge:
// separators, hash-tag braces, whitespace, invalid UTF-8, long keys that
// differ only at one end. No two may share state.
func hostileKeys() [][2]string {
	long := strings.Repeat("x", 10<<10)
	return [][2]string{
		{"", "a"}, {"", "a "}, {"", " a"}, {"", "a\n"}, {"", "a\r\n"}, {"", "a\t"},
		{"", "{a}"}, {"", "{a"}, {"", "a}"}, {"", "}a{"}, {"", "{}a"},
		{"", "a:b"}, {"a", "b"}, {"a", ":b"}, {"a:", "b"},
		{"", "a:b:c"}, {"a", "b:c"}, {"a:b", "c"},
		{"z{", "}k"}, {"z", "{}k"}, {"z}", "{k"},
		{"", "a\x00b"}, {"a\x00", "b"}, {"a", "\x00b"},
		{"", "\xff"}, {"", "\xff\xfe"}, {"", "\xef\xbf\xbd"}, {"", "é"}, {"", "e\u0301"},
		{"", long}, {"", long + "y"}, {"", "y" + long}, {"", long[1:] + "y"},
		{long, "k"}, {long[1:], "xk"},
	}
}

// testIsolation records a distinct cost on each hostile (zone, key) and
// reads each back alone, for every algorithm; then resets one and checks
// that the others kept their state.
func testIsolation(t *testing.T, f Factory) {
	forEachAlgorithm(t, func(t *testing.T, a sluice.Algorithm) {
		h := newHarness(t, f)
		keys := hostileKeys()
		l := limit(a, 100, time.Minute)
		hit := func(i int) sluice.Check {
			return sluice.Check{Hits: []sluice.Hit{{Zone: keys[i][0], Key: keys[i][1], Limit: l}}, Cost: int64(i + 1)}
		}
		for i := range keys {
			h.check(hit(i))
		}
		for i := range keys {
			if got := h.peek(hit(i), 0).Used; !same(got, float64(i+1)) {
				t.Errorf("zone %q key %q: used %v, want %d", trunc(keys[i][0]), trunc(keys[i][1]), got, i+1)
			}
		}
		h.reset(hit(0))
		for i := range keys {
			want := float64(i + 1)
			if i == 0 {
				want = 0
			}
			if got := h.peek(hit(i), 0).Used; !same(got, want) {
				t.Errorf("after resetting %q: zone %q key %q used %v, want %v", keys[0][1], trunc(keys[i][0]), trunc(keys[i][1]), got, want)
			}
		}
	})
}

func trunc(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}
