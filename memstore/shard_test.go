package memstore

import (
	"fmt"
	"testing"
)

// TestHashCollisions drives a shard's chains directly: distinct states
// under one hash are found, removed, expired and evicted one by one.
func TestHashCollisions(t *testing.T) {
	var sh shard
	sh.init(3)
	const h = 42
	keys := make([]stateKey, 4)
	entries := make([]*entry, 4)
	for i := range keys {
		keys[i] = stateKey{key: fmt.Sprint("k", i), window: 1}
		entries[i] = newEntry(codeWindow)
		entries[i].setID(keys[i])
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

	sh.remove(h, entries[2]) // from the middle of the chain
	if sh.n != 2 || sh.find(h, &keys[2]) != nil || sh.find(h, &keys[1]) != entries[1] || sh.find(h, &keys[3]) != entries[3] {
		t.Fatalf("remove from the middle broke the chain")
	}
	if dropped := sh.dropExpired(h, sh.m[h], 101); dropped != 1 || sh.n != 1 || sh.find(h, &keys[3]) != entries[3] {
		t.Fatalf("dropExpired at 101: dropped %d, %d left", dropped, sh.n)
	}
	if dropped := sh.dropExpired(h, sh.m[h], 1000); dropped != 1 || sh.n != 0 || len(sh.m) != 0 {
		t.Fatalf("dropExpired at 1000: dropped %d, %d entries, %d slots left", dropped, sh.n, len(sh.m))
	}
}
