package memstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/internal/ident"
)

// TestHashCollisions drives a shard's table directly: distinct states
// under one hash are found, removed, expired and evicted one by one.
func TestHashCollisions(t *testing.T) {
	var sh shard
	sh.init(3)
	const h = 42
	keys := make([]stateKey, 4)
	entries := make([]*entry, 4)
	for i := range keys {
		keys[i] = stateKey{State: ident.State{Key: fmt.Sprint("k", i), Limit: ident.Limit{Code: codeWindow, Window: 1}}}
		entries[i] = newEntry(codeWindow)
		entries[i].setID(&keys[i])
		entries[i].expires = int64(100 + i)
	}
	for i := range 3 {
		if evicted, expired := sh.insert(h, entries[i], 0); evicted || expired != 0 {
			t.Fatalf("insert %d into a shard with room: evicted %v, expired %d", i, evicted, expired)
		}
	}
	for i := range 3 {
		if got := sh.find(h, &keys[i]); got != entries[i] {
			t.Fatalf("find(k%d) = %p, want %p", i, got, entries[i])
		}
	}
	if got := sh.find(h, &keys[3]); got != nil {
		t.Fatalf("find of an absent key sharing the hash = %+v", got)
	}

	// Full: the entry that resets soonest (k0, at 100) goes.
	if evicted, _ := sh.insert(h, entries[3], 0); !evicted || sh.n != 3 {
		t.Fatalf("insert into a full shard: evicted %v, %d entries", evicted, sh.n)
	}
	if sh.find(h, &keys[0]) != nil || sh.find(h, &keys[3]) != entries[3] {
		t.Fatalf("eviction removed the wrong entry")
	}

	sh.remove(h, entries[2]) // from the middle of the run of equal hashes
	if sh.n != 2 || sh.find(h, &keys[2]) != nil || sh.find(h, &keys[1]) != entries[1] || sh.find(h, &keys[3]) != entries[3] {
		t.Fatalf("remove from the middle broke the run")
	}
	// At the bound again, an insert drops the expired entry (k1, at 101)
	// rather than evicting a live one.
	k4 := stateKey{State: ident.State{Key: "k4", Limit: ident.Limit{Code: codeWindow, Window: 1}}}
	e4 := newEntry(codeWindow)
	e4.setID(&k4)
	e4.expires = 1000
	sh.max = 2
	if evicted, expired := sh.insert(h, e4, 102); evicted || expired != 1 || sh.n != 2 {
		t.Fatalf("insert at 102 into a full shard: evicted %v, expired %d, %d entries", evicted, expired, sh.n)
	}
	if sh.find(h, &keys[1]) != nil || sh.find(h, &keys[3]) != entries[3] || sh.find(h, &k4) != e4 {
		t.Fatalf("the expired entry was not the one dropped")
	}
}

// TestTableModel holds a shard's table to a Go map on random inserts,
// removals and sweeps, with hashes drawn from a small range so that runs
// of probes wrap around, collide and are shifted back by removals.
func TestTableModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var sh shard
	sh.init(1 << 20)
	type stored struct {
		hash uint64
		e    *entry
		k    stateKey
	}
	model := map[string]stored{}
	now := int64(0)
	for step := range 200_000 {
		now++
		name := fmt.Sprint("k", rng.IntN(3000))
		switch op := rng.IntN(10); {
		case op < 6: // insert if absent
			if _, ok := model[name]; ok {
				break
			}
			st := stored{hash: rng.Uint64N(64) * 0x9E3779B97F4A7C15, k: stateKey{State: ident.State{Key: name, Limit: ident.Limit{Code: codeWindow, Window: 1}}}}
			if rng.IntN(4) == 0 {
				st.hash = uint64(rng.IntN(8)) // clustered low hashes
			}
			st.e = newEntry(codeWindow)
			st.e.setID(&st.k)
			st.e.expires = now + rng.Int64N(5000)
			sh.insert(st.hash, st.e, now)
			model[name] = st
		case op < 9: // remove if present
			if st, ok := model[name]; ok {
				sh.remove(st.hash, st.e)
				delete(model, name)
			}
		default: // sweep
			sh.sweep(now)
			for name, st := range model {
				if st.e.expires <= now && sh.find(st.hash, &st.k) == nil {
					delete(model, name)
				}
			}
		}
		if int(sh.n) != len(model) {
			t.Fatalf("step %d: %d entries, model %d", step, sh.n, len(model))
		}
		if step%1000 == 0 || step > 199_000 {
			for name, st := range model {
				if got := sh.find(st.hash, &st.k); got != st.e {
					t.Fatalf("step %d: find(%s) = %p, want %p", step, name, got, st.e)
				}
			}
			if n := len(sh.slots); int(sh.n)*growDen > n*growNum {
				t.Fatalf("step %d: %d entries in %d slots", step, sh.n, n)
			}
		}
	}
}

// TestShardLayout holds the shard header to what its comment promises:
// 128 bytes, the fields a locked check writes in the first 56, those peek
// reads in bytes 64 to 120, and the shards of
// a store starting at a multiple of 128 bytes or 8 bytes past one, for
// every shard count, so those fields lie in one 64-byte cache line. It
// guards speed, not correctness: a check on another core moves one cache
// line of the header, never a neighbour's.
func TestShardLayout(t *testing.T) {
	var sh shard
	if got := unsafe.Sizeof(sh); got != 128 {
		t.Errorf("shard is %d bytes, want 128", got)
	}
	if end := unsafe.Offsetof(sh.idle) + unsafe.Sizeof(sh.idle); end > 56 {
		t.Errorf("shard's locked fields end at byte %d, want <= 56", end)
	}
	if start, end := unsafe.Offsetof(sh.seq), unsafe.Offsetof(sh.slots)+unsafe.Sizeof(sh.slots); start < 64 || end > 120 {
		t.Errorf("shard's fields for peek lie in bytes %d to %d, want within 64 to 120", start, end)
	}
	for _, n := range []int{1, 2, 8, 32, 64, 256, 1024} {
		s := newStore(t, Options{MaxKeys: 1 << 20, Shards: n})
		if p := uintptr(unsafe.Pointer(&s.shards[0])); p%128 > 8 {
			t.Errorf("%d shards start at %#x, %d bytes past a 128-byte boundary, want 0 or 8", n, p, p%128)
		}
	}
}
