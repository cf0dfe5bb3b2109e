package memstore

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"unsafe"
)

// hashKeys are a store's secret keys for hashing identities: random, so
// that clients, who choose the keys, cannot choose which keys collide.
type hashKeys struct {
	seed maphash.Seed // for strings longer than maxShortHash
	k    [2]uint64    // for the others; odd
}

func newHashKeys() hashKeys {
	return hashKeys{seed: maphash.MakeSeed(), k: [2]uint64{rand.Uint64() | 1, rand.Uint64() | 1}}
}

// maxShortHash is the longest string strHash hashes itself; longer ones
// go to hash/maphash, whose call costs more than a short string's hashing
// and less than a long one's.
const maxShortHash = 48

// strHash hashes x, chained to h: wyhash's construction, as the Go
// runtime's map hash has it where the processor has no AES instructions,
// with the store's random keys. Every check hashes its key, usually a
// short one, and this costs a third of the instructions of maphash.String
// (a chain of calls down to the runtime's hash).
func (hk *hashKeys) strHash(x string, h uint64) uint64 {
	n := len(x)
	if n > maxShortHash {
		return h ^ maphash.String(hk.seed, x)*0x9E3779B97F4A7C15
	}
	b := unsafe.Slice(unsafe.StringData(x), n) // read only
	var lo, hi uint64
	h ^= hk.k[0]
	switch {
	case n > 16:
		for i := 0; n-i > 16; i += 16 {
			h = mix(binary.LittleEndian.Uint64(b[i:])^hk.k[1], binary.LittleEndian.Uint64(b[i+8:])^h)
		}
		lo, hi = binary.LittleEndian.Uint64(b[n-16:]), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 8:
		lo, hi = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		lo, hi = uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n > 0:
		lo = uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
	}
	return mix(0x1d8e4e27c47d124f^uint64(n), mix(lo^hk.k[1], hi^h))
}

// mix is wyhash's mixing step: the halves of the 128-bit product, xored.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// keyHash hashes a group, a zone and a key with the store's keys. Its low
// bits choose the shard, so every limit of one key shares a shard and a
// multi-limit check on one key takes one lock. Each part is hashed with
// its length, so moving bytes between the parts changes the hash.
func (s *Store) keyHash(group, zone, key string) uint64 {
	return s.hashMore(s.hash.strHash(key, 0), group, zone)
}

// hashMore is keyHash of group, zone and a key whose strHash is h.
func (s *Store) hashMore(h uint64, group, zone string) uint64 {
	if zone != "" {
		h = s.hash.strHash(zone, h^0x9E3779B97F4A7C15)
	}
	if group != "" {
		h = s.hash.strHash(group, h^0xD6E8FEB86659FD93)
	}
	return h
}

// stateHash extends a key hash with the limit's identity. The key hash is
// mixed already (strHash's last step is a multiplication), so one fold of
// the high half into the low one does: the low bits pick a state's slot,
// and without the fold they would be the key hash's low bits, which pick
// the shard and so are alike for every state of a shard. Equal hashes are
// told apart by the entries' keys, so a collision costs time, never
// correctness.
func stateHash(kh uint64, k *stateKey) uint64 {
	h := kh ^ uint64(k.Limit.Window)*0xC2B2AE3D27D4EB4F ^ uint64(k.Limit.Bucket)*0x165667B19E3779F9 ^ uint64(k.Limit.Code)<<59
	return h ^ h>>32
}
