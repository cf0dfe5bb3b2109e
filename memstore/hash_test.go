package memstore

import (
	"fmt"
	"hash/maphash"
	"testing"
)

// fixedKeys are hash keys fixed for the tests, so that what they assert
// does not depend on a random draw.
var fixedKeys = hashKeys{k: [2]uint64{0x9E3779B97F4A7C15, 0xD6E8FEB86659FD93}}

// pattern returns n distinct-looking bytes.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i*7%26)
	}
	return b
}

// TestStrHashReadsEveryByte: for every length strHash hashes itself, a
// change of any one byte, of the length, or of the hash chained in
// changes the hash.
func TestStrHashReadsEveryByte(t *testing.T) {
	for n := range maxShortHash + 1 {
		b := pattern(n)
		h := fixedKeys.strHash(string(b), 0)
		if n > 0 {
			if fixedKeys.strHash(string(b[:n-1]), 0) == h {
				t.Errorf("length %d: the hash of the first %d bytes is the same", n, n-1)
			}
		}
		if fixedKeys.strHash(string(b), 1) == h {
			t.Errorf("length %d: the chained hash does not change the result", n)
		}
		for i := range n {
			for _, bit := range []byte{1, 0x80} {
				c := append([]byte(nil), b...)
				c[i] ^= bit
				if fixedKeys.strHash(string(c), 0) == h {
					t.Errorf("length %d: flipping bit %#x of byte %d leaves the hash", n, bit, i)
				}
			}
		}
	}
}

// TestKeyHashParts: moving bytes between the group, the zone and the key
// changes the key hash, as do long parts (hashed by maphash, whose seed
// is random: two of these hashes collide with a chance of about 2^-58).
func TestKeyHashParts(t *testing.T) {
	s := &Store{hash: fixedKeys}
	s.hash.seed = maphash.MakeSeed()
	long := string(pattern(maxShortHash + 10))
	parts := [][3]string{
		{"", "", "abc"}, {"", "a", "bc"}, {"", "ab", "c"}, {"a", "", "bc"}, {"a", "b", "c"},
		{"ab", "", "c"}, {"", "abc", "d"}, {"", "", long}, {"", "z", long}, {long, "", "k"},
		{"", long, "k"},
	}
	seen := map[uint64]string{}
	for _, p := range parts {
		name := fmt.Sprintf("%q", p)
		h := s.keyHash(p[0], p[1], p[2])
		if other, ok := seen[h]; ok {
			t.Errorf("group, zone, key %s and %s hash alike", name, other)
		}
		seen[h] = name
	}
}

// TestInlineEq holds inlineEq to string comparison for every length an
// inline identity has, with a difference at every position.
func TestInlineEq(t *testing.T) {
	for n := range inlineID + 1 {
		b := pattern(n)
		if !inlineEq(b, string(b)) {
			t.Errorf("length %d: equal bytes compare unequal", n)
		}
		for i := range n {
			for _, bit := range []byte{1, 0x80} {
				c := append([]byte(nil), b...)
				c[i] ^= bit
				if inlineEq(b, string(c)) {
					t.Errorf("length %d: bytes differing at %d (bit %#x) compare equal", n, i, bit)
				}
			}
		}
	}
}
