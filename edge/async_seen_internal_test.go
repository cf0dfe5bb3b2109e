package edge

import (
	"testing"
	"unsafe"
)

// TestSeenViewIsOneCacheLine: a view of the seen table is one cache line,
// so that a lookup reads one line of tags and one of view.
func TestSeenViewIsOneCacheLine(t *testing.T) {
	if n := unsafe.Sizeof(seenView{}); n != 64 {
		t.Errorf("seenView is %d bytes, want 64", n)
	}
}

// TestSeenTableWithinMaxBytes: the seen table takes at most a quarter of
// MaxBytes, and what is left for slots is MaxBytes less the table.
func TestSeenTableWithinMaxBytes(t *testing.T) {
	for _, c := range []struct{ keys, bytes int64 }{{100_000, 64 << 20}, {1_000_000, 1 << 30}, {1_000_000, 8 << 20}, {10, 1 << 20}} {
		tab := newSeenTable(c.keys, c.bytes)
		if tab == nil {
			t.Fatalf("no table for %d keys in %d bytes", c.keys, c.bytes)
		}
		var n int64
		for i := range tab.shards {
			sh := &tab.shards[i]
			n += int64(len(sh.tags))*8 + int64(len(sh.views))*int64(unsafe.Sizeof(seenView{})) + int64(len(sh.slots))*4
		}
		if n != tab.bytes || n > c.bytes/seenShare {
			t.Errorf("%d keys, MaxBytes %d: table of %d bytes, counted %d, want at most %d", c.keys, c.bytes, n, tab.bytes, c.bytes/seenShare)
		}
		if entries := int64(len(tab.shards[0].tags)) * asyncShards; entries < c.keys && 2*n <= c.bytes/seenShare {
			t.Errorf("%d keys, MaxBytes %d: %d entries", c.keys, c.bytes, entries)
		}
	}
	if tab := newSeenTable(100, 64<<10); tab != nil {
		t.Errorf("a table of %d bytes for MaxBytes 64 KiB, want none", tab.bytes)
	}
}
