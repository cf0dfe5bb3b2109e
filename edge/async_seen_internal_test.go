package edge

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// TestSeenViewIsOneCacheLine: a view of the seen table is one cache line,
// so that a lookup reads one line of tags and one of view; a tag is 8
// bytes, so a set's tags and meta word are one line.
func TestSeenViewIsOneCacheLine(t *testing.T) {
	if n := unsafe.Sizeof(seenView{}); n != 64 {
		t.Errorf("seenView is %d bytes, want 64", n)
	}
	if n := unsafe.Sizeof(atomic.Uint64{}); n != 8 {
		t.Errorf("a tag is %d bytes, want 8", n)
	}
}

// TestSeenTableWithinMaxBytes: the seen table takes at most a quarter of
// MaxBytes, and what is left for slots is MaxBytes less the table.
func TestSeenTableWithinMaxBytes(t *testing.T) {
	for _, c := range []struct{ keys, bytes int64 }{{100_000, 64 << 20}, {1_000_000, 8 << 20}, {10, 1 << 20}} {
		tab := newSeenTable(c.keys, c.bytes)
		if tab == nil {
			t.Fatalf("no table for %d keys in %d bytes", c.keys, c.bytes)
		}
		var n int64
		for i := range tab.shards {
			sh := &tab.shards[i]
			n += int64(len(sh.tags))*8 + int64(len(sh.views))*int64(unsafe.Sizeof(seenView{}))
		}
		if n != tab.bytes || n > c.bytes/seenShare {
			t.Errorf("%d keys, MaxBytes %d: table of %d bytes, counted %d, want at most %d", c.keys, c.bytes, n, tab.bytes, c.bytes/seenShare)
		}
		if entries := int64(len(tab.shards[0].views)) * asyncShards; entries < c.keys && 2*n <= c.bytes/seenShare {
			t.Errorf("%d keys, MaxBytes %d: %d entries", c.keys, c.bytes, entries)
		}
	}
	if tab := newSeenTable(100, 64<<10); tab != nil {
		t.Errorf("a table of %d bytes for MaxBytes 64 KiB, want none", tab.bytes)
	}
}

// TestSeenSetGivesEntriesUpInTurn: a full set takes a new key's answer in
// place of its entries in turn, never of a free one's, and keeps the later
// of two answers about one key.
func TestSeenSetGivesEntriesUpInTurn(t *testing.T) {
	tab := newSeenTable(1, 1<<20) // one set per shard
	sh := &tab.shards[0]
	fp := func(i uint64) fingerprint { return fingerprint{lo: i, hi: i << 8 * asyncShards} }
	c := sluice.Check{Cost: 1, Hits: []sluice.Hit{{Key: "k", Limit: sluice.Limit{Rate: 10, Window: time.Second}}}}
	r := &sluice.HitResult{Allowed: true, Remaining: 9}
	for i := range uint64(seenWays) {
		sh.put(fp(i+1), &c, 0, 7, r, 100)
	}
	for i := range uint64(seenWays) {
		if sh.find(fp(i+1)) < 0 {
			t.Fatalf("key %d lost while the set had room", i+1)
		}
	}
	sh.put(fp(100), &c, 0, 7, r, 200)
	sh.put(fp(101), &c, 0, 7, r, 200)
	lost := 0
	for i := range uint64(seenWays) {
		if sh.find(fp(i+1)) < 0 {
			lost++
		}
	}
	if lost != 2 || sh.find(fp(100)) < 0 || sh.find(fp(101)) < 0 {
		t.Errorf("two keys into a full set: %d old ones lost, want 2 (and the new ones kept)", lost)
	}
	later := &sluice.HitResult{Allowed: true, Remaining: 3}
	sh.put(fp(100), &c, 0, 7, later, 300)
	sh.put(fp(100), &c, 0, 7, r, 250) // an earlier answer, arriving after
	if v := sh.views[sh.find(fp(100))]; v.remaining != 3 || v.at != 300 {
		t.Errorf("view %+v, want the answer of 300 (3 remaining)", v)
	}
}

// TestSeenSetCountsItsSlots: the meta word of a key's set counts the
// slots of the set (so a set without one skips the map) and those made
// from it: one more when the key's second check makes its slot, one less
// when the slot goes (a reset).
func TestSeenSetCountsItsSlots(t *testing.T) {
	a, c := newMemAsync(t)
	k := slotKeyOf(&c, 0)
	meta := a.seen.meta(a.fingerprint(&k))
	var d sluice.Decision
	for i, want := range []uint64{0, madeOne + 1, madeOne + 1} {
		if err := a.Check(context.Background(), c, &d); err != nil {
			t.Fatal(err)
		}
		if got := meta.Load(); got != want {
			t.Errorf("after check %d: meta %#x, want %#x", i+1, got, want)
		}
	}
	if err := a.Reset(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if got := meta.Load(); got != madeOne {
		t.Errorf("after the reset: meta %#x, want %#x (no slot, one made)", got, madeOne)
	}
}
