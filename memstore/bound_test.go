package memstore

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// maxStateBytes is the most heap one sliding-window state holds, whatever
// the length of its zone and key, map overhead included: the bound
// docs/memstore.md states (MaxKeys × maxStateBytes for the whole store).
const maxStateBytes = 256

// TestMemoryBoundLongKeys performs the long-key attack: thousands of
// allowed checks, each on a new key of nearly sluice.MaxKeyLen bytes. The
// heap the store holds afterwards stays under MaxKeys × maxStateBytes: a
// key's length costs nothing once the check is over.
func TestMemoryBoundLongKeys(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocates hundreds of MB; -race inflates the figures")
	}
	const (
		maxKeys = 4096
		checks  = 3 * maxKeys
		keyLen  = 65_000
	)
	now := time.Unix(1_700_000_000, 0)
	lim := sluice.Limit{Rate: 100, Window: time.Hour}
	buf := []byte(strings.Repeat("Bearer sk_live_", keyLen/15+1)[:keyLen])
	var d sluice.Decision
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	s := newStore(t, Options{MaxKeys: maxKeys, Now: func() time.Time { return now }})
	for i := range checks {
		copy(buf, fmt.Sprintf("%08d", i))
		c := sluice.Check{Hits: []sluice.Hit{{Zone: "upload", Key: string(buf), Limit: lim}}, Cost: 1}
		if err := s.Check(context.Background(), c, &d); err != nil || !d.Allowed {
			t.Fatalf("check %d: %v, allowed %v", i, err, d.Allowed)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	held := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	st := s.Stats()
	t.Logf("%d checks with %d-byte keys: %d states, %d bytes held (%.0f per state)", checks, keyLen, st.Keys, held, float64(held)/float64(st.Keys))
	if st.Keys > maxKeys {
		t.Errorf("%d states, bound %d", st.Keys, maxKeys)
	}
	if bound := int64(maxKeys * maxStateBytes); held > bound {
		t.Errorf("store holds %d bytes after the flood, want <= %d (MaxKeys × %d)", held, bound, maxStateBytes)
	}
	// The digested states are still told apart and counted.
	copy(buf, fmt.Sprintf("%08d", checks-1))
	c := sluice.Check{Hits: []sluice.Hit{{Zone: "upload", Key: string(buf), Limit: lim}}}
	if err := s.Check(context.Background(), c, &d); err != nil || d.Hits[0].Used != 1 {
		t.Errorf("peek of the last long key: %v, used %v, want 1", err, d.Hits[0].Used)
	}
	runtime.KeepAlive(s)
}

// TestMemoryPerKeyLength measures the heap held per sliding-window state
// for keys of every storage class (inline, whole, digested): none may
// exceed maxStateBytes.
func TestMemoryPerKeyLength(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocates tens of MB; -race inflates the figures")
	}
	for _, keyLen := range []int{8, 28, 29, 60, 61, 1000, 65_000} {
		t.Run(fmt.Sprint(keyLen), func(t *testing.T) {
			const n = 20_000
			now := time.Unix(1_700_000_000, 0)
			lim := sluice.Limit{Rate: 100, Window: time.Minute}
			buf := []byte(strings.Repeat("k", keyLen))
			var d sluice.Decision
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			s := newStore(t, Options{Now: func() time.Time { return now }})
			for i := range n {
				copy(buf, fmt.Sprintf("%x", i)) // zone "zone" + key: keyLen+4 bytes
				c := sluice.Check{Hits: []sluice.Hit{{Zone: "zone", Key: string(buf), Limit: lim}}, Cost: 1}
				if err := s.Check(context.Background(), c, &d); err != nil {
					t.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			perKey := float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / n
			t.Logf("zone+key of %d bytes: %.0f bytes per state", keyLen+4, perKey)
			if got := s.Stats().Keys; got != n {
				t.Fatalf("%d states, want %d", got, n)
			}
			if perKey > maxStateBytes {
				t.Errorf("%.0f bytes per state, want <= %d", perKey, maxStateBytes)
			}
			runtime.KeepAlive(s)
		})
	}
}

// TestLongKeysAllocs: checking a known long key allocates nothing, as a
// short one does (the digest is computed on the stack).
func TestLongKeysAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under coverage and -race")
	}
	now := time.Unix(1_700_000_000, 0)
	s := newStore(t, Options{Now: func() time.Time { return now }})
	lim := sluice.Limit{Rate: 1e6, Window: time.Minute}
	long := strings.Repeat("x", 5000)
	var d sluice.Decision
	for _, hits := range [][]sluice.Hit{
		{{Zone: "z", Key: long, Limit: lim}},
		{{Zone: "z", Key: long, Limit: lim}, {Zone: "z", Key: long[:40], Limit: lim}},
	} {
		c := sluice.Check{Hits: hits, Cost: 1}
		check := func() {
			if err := s.Check(context.Background(), c, &d); err != nil || !d.Allowed {
				t.Fatalf("Check: %v, %+v", err, d)
			}
		}
		check()
		if got := testing.AllocsPerRun(100, check); got != 0 {
			t.Errorf("%d hits: %v allocations per check, want 0", len(hits), got)
		}
	}
}

// TestLongKeysIdentity: digested identities are told apart as whole ones
// are (a last byte, the split between zone and key, the limit), and Reset
// forgets them.
func TestLongKeysIdentity(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newStore(t, Options{Now: func() time.Time { return now }})
	long := strings.Repeat("x", 200)
	lim := sluice.Limit{Rate: 1, Window: time.Hour}
	var d sluice.Decision
	check := func(zone, key string, l sluice.Limit) bool {
		t.Helper()
		if err := s.Check(context.Background(), sluice.Check{Hits: []sluice.Hit{{Zone: zone, Key: key, Limit: l}}, Cost: 1}, &d); err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	for _, c := range []struct{ zone, key string }{
		{"z", long + "a"},
		{"z", long + "b"},      // another last byte
		{"zx", long[1:] + "a"}, // the same bytes, split elsewhere
		{"z", long[:40] + "a"}, // kept whole, not digested
		{"", "z" + long + "a"}, // no zone
	} {
		if !check(c.zone, c.key, lim) {
			t.Errorf("zone %q, key of %d bytes: first check denied: shares state with another", c.zone, len(c.key))
		}
		if check(c.zone, c.key, lim) {
			t.Errorf("zone %q, key of %d bytes: second check allowed: its state was not found", c.zone, len(c.key))
		}
	}
	if !check("z", long+"a", sluice.Limit{Rate: 1, Window: time.Minute}) {
		t.Errorf("another window shares the state of a long key")
	}
	c := sluice.Check{Hits: []sluice.Hit{{Zone: "z", Key: long + "a", Limit: lim}, {Zone: "z", Key: long + "b", Limit: lim}}}
	if err := s.Reset(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if !check("z", long+"a", lim) || !check("z", long+"b", lim) {
		t.Errorf("Reset did not forget long keys")
	}
}
