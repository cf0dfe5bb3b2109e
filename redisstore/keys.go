package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
)

// maxPart is the longest encoded zone, tag or key kept as is; longer ones
// are replaced by their SHA-256 (see encodePart).
const maxPart = 128

// algoCode is the one-letter code of each algorithm in the scripts' ARGV.
var algoCode = map[sluice.Algorithm]string{
	sluice.SlidingWindow: "w",
	sluice.Buckets:       "b",
	sluice.Log:           "l",
	sluice.Decay:         "d",
	sluice.GCRA:          "g",
}

// keyCode is the code of each algorithm in keys. Upper case since the
// state format of every algorithm changed (hashes and integer fields,
// where it was one formatted string): the state of an older version, under
// the lower-case codes, is ignored (it expires) rather than misread.
var keyCode = map[sluice.Algorithm]string{
	sluice.SlidingWindow: "W",
	sluice.Buckets:       "B",
	sluice.Log:           "L",
	sluice.Decay:         "D",
	sluice.GCRA:          "G",
}

// stateKey returns the Redis key of one hit's state:
//
//	<prefix><zone>{<tag>}:<ALGO><window µs>[/<bucket µs>][:<key>]
//
// The tag is the hit's key, or the check's group when set; then the hit's
// key follows the identity. Every user-supplied part is encoded by
// encodePart, which leaves no "{" or "}" and no ":", so the tag Redis
// Cluster hashes is exactly the encoded tag and no two different (zone,
// group, key, limit identity) share a key.
func stateKey(prefix string, h sluice.Hit, group string) (key, tag string) {
	tag = encodePart(h.Key)
	if group != "" {
		tag = encodePart(group)
	}
	zone := encodePart(h.Zone)
	var suffix string
	if group != "" {
		suffix = encodePart(h.Key)
	}
	// The numbers go through a stack buffer and the key is built in one
	// allocation of its exact size.
	var buf [48]byte
	num := strconv.AppendInt(buf[:0], h.Limit.Window.Microseconds(), 10)
	if h.Limit.Algo() == sluice.Buckets {
		num = append(num, '/')
		num = strconv.AppendInt(num, h.Limit.Bucket().Microseconds(), 10)
	}
	code := keyCode[h.Limit.Algo()]
	var b strings.Builder
	b.Grow(len(prefix) + len(zone) + len(tag) + len(code) + len(num) + len(suffix) + 4)
	b.WriteString(prefix)
	b.WriteString(zone)
	b.WriteByte('{')
	b.WriteString(tag)
	b.WriteString("}:")
	b.WriteString(code)
	b.Write(num)
	if group != "" {
		b.WriteByte(':')
		b.WriteString(suffix)
	}
	return b.String(), tag
}

// encodePart escapes s so that it contains only printable ASCII other than
// "{", "}", ":" and "%": each of those bytes, spaces, control bytes and
// every byte >= 0x80 becomes %XX (upper-case hex). The encoding is
// injective. An encoding longer than maxPart bytes is replaced by "%H"
// followed by the hex SHA-256 of s: "%H" cannot start an escape ("H" is not
// a hex digit), so a hashed part never equals an escaped one.
func encodePart(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if escaped(s[i]) {
			n += 2
		}
	}
	if n == 0 && len(s) <= maxPart {
		return s
	}
	if len(s)+n > maxPart {
		sum := sha256.Sum256([]byte(s))
		return "%H" + hex.EncodeToString(sum[:])
	}
	const digits = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if escaped(c) {
			b = append(b, '%', digits[c>>4], digits[c&15])
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

func escaped(c byte) bool {
	return c <= ' ' || c >= 0x7f || c == '{' || c == '}' || c == ':' || c == '%'
}

// slot returns the Redis Cluster hash slot of a key whose hash tag is tag:
// CRC16 (XMODEM) of the tag, mod 16384.
func slot(tag string) uint16 {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
