package edge

import (
	"math/bits"
	"math/rand/v2"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ident"
)

// fingerprint is a 128-bit digest of a check's identity: two checks with
// the same fingerprint are taken to be the same check. The digest is keyed
// by a random secret per cache, so a client cannot choose keys that collide;
// two distinct checks collide with probability about 2^-128 per pair.
type fingerprint struct{ lo, hi uint64 }

// secret keys the fingerprints of one cache.
type secret [4]uint64

func newSecret() secret {
	var s secret
	for i := range s {
		s[i] = rand.Uint64() | 1 // odd: never a zero factor on its own
	}
	return s
}

// hasher is a two-lane multiply-and-fold hash in the style of wyhash: each
// 16 bytes of input are folded into both 64-bit lanes with a 64x64->128
// multiplication keyed by the secret. One pass over the input, no
// allocation.
type hasher struct {
	a, b uint64
	s    *secret
}

func mix(x, y uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return hi ^ lo
}

func (h *hasher) init(s *secret) { *h = hasher{a: s[0], b: s[1], s: s} }

// word folds two words of input into the state.
func (h *hasher) word(x, y uint64) {
	a, b := h.a, h.b
	h.a = mix(x^a^h.s[0], y^h.s[2]^b>>1)
	h.b = mix(y^b^h.s[1], x^h.s[3]^a>>1)
}

// str folds the length of s, then s itself, into the state: length first,
// so that no sequence of strings is a prefix of another.
func (h *hasher) str(s string) {
	h.word(uint64(len(s)), 0x9e3779b97f4a7c15)
	h.blocks(s)
}

// blocks folds the bytes of s into the state, 16 at a time, the last block
// padded with zeros. The caller folds the length in first.
func (h *hasher) blocks(s string) {
	for len(s) >= 16 {
		h.word(load64(s), load64(s[8:]))
		s = s[16:]
	}
	if len(s) > 0 {
		var x, y uint64
		for i := 0; i < len(s) && i < 8; i++ {
			x |= uint64(s[i]) << (8 * i)
		}
		for i := 8; i < len(s); i++ {
			y |= uint64(s[i]) << (8 * (i - 8))
		}
		h.word(x, y)
	}
}

// load64 reads s[0:8] as a little-endian word. The compiler turns it into
// one load.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func (h *hasher) sum() fingerprint {
	a, b := h.a, h.b
	a, b = mix(a^h.s[2], b^h.s[3]), mix(b^h.s[0], a^h.s[1])
	return fingerprint{lo: a ^ b>>7, hi: b ^ a<<9}
}

func btou(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// algoCode numbers the algorithms for the fingerprint, by their ID in the
// algorithm table; unknown names (invalid checks, which the store rejects)
// are hashed as strings.
func algoCode(a sluice.Algorithm) (uint64, bool) {
	if al, ok := ident.Lookup(string(a)); ok {
		return uint64(al.ID), true
	}
	return 0, false
}

// fingerprintOf returns the fingerprint of c's identity for the deny cache:
// its cost, group, shadow flag and, for every hit, its zone, key and limit
// (all but its Name, which changes nothing the store decides). Each string
// is read once. keys[i] receives a digest of hit i's zone and key alone,
// which is what Reset matches on.
func fingerprintOf(s *secret, c *sluice.Check, keys *[sluice.MaxHits]uint64) fingerprint {
	var h, k hasher
	h.init(s)
	h.word(uint64(c.Cost), uint64(len(c.Hits))|btou(c.Shadow)<<8|uint64(len(c.Group))<<9)
	h.blocks(c.Group)
	for i := range c.Hits {
		hit := &c.Hits[i]
		// The zone and key go through a hasher of their own, whose state
		// is folded into the check's: the digest for Reset comes free.
		k.zoneKey(s, hit.Zone, hit.Key)
		if i < len(keys) {
			keys[i] = k.a ^ k.b<<1
		}
		h.word(k.a, k.b)
		l := &hit.Limit
		code, ok := algoCode(l.Algorithm)
		if !ok {
			h.str(string(l.Algorithm))
		}
		h.word(uint64(l.Rate), uint64(l.Window))
		h.word(uint64(l.Resolution), code<<1|btou(l.Shadow))
	}
	return h.sum()
}

// zoneKey starts k afresh on a zone and key.
func (k *hasher) zoneKey(s *secret, zone, key string) {
	k.init(s)
	k.word(uint64(len(zone)), uint64(len(key)))
	k.blocks(zone)
	k.blocks(key)
}

// keyDigest returns the digest of a zone and key that fingerprintOf writes
// to keys.
func keyDigest(s *secret, zone, key string) uint64 {
	var k hasher
	k.zoneKey(s, zone, key)
	return k.a ^ k.b<<1
}
