package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ident"
)

// maxPart is the longest encoded zone, tag or key kept as is; longer ones
// are replaced by their SHA-256 (see encodePart).
const maxPart = 128

// stateKey returns the Redis key of a hit's state st:
//
//	<prefix><zone>{<tag>}:<ALGO><window µs>[/<bucket µs>][:<key>]
//
// ALGO is the algorithm's ident.Algo.KeyCode. The tag is the hit's key, or
// the check's group when set; then the hit's key follows the identity.
// Every user-supplied part is encoded by encodePart, which leaves no "{" or
// "}" and no ":", so the tag Redis Cluster hashes is exactly the encoded
// tag, and two different ident.States never share a key.
func stateKey(prefix string, st ident.State) (key, tag string) {
	tag = encodePart(st.Key)
	if st.Group != "" {
		tag = encodePart(st.Group)
	}
	zone := encodePart(st.Zone)
	var suffix string
	if st.Group != "" {
		suffix = encodePart(st.Key)
	}
	a, _ := st.Limit.Algo()
	// The numbers go through a stack buffer and the key is built in one
	// allocation of its exact size.
	var buf [48]byte
	num := append(buf[:0], a.KeyCode())
	num = strconv.AppendInt(num, st.Limit.Window, 10)
	if a.Bucketed {
		num = append(num, '/')
		num = strconv.AppendInt(num, st.Limit.Bucket, 10)
	}
	var b strings.Builder
	b.Grow(len(prefix) + len(zone) + len(tag) + len(num) + len(suffix) + 4)
	b.WriteString(prefix)
	b.WriteString(zone)
	b.WriteByte('{')
	b.WriteString(tag)
	b.WriteString("}:")
	b.Write(num)
	if st.Group != "" {
		b.WriteByte(':')
		b.WriteString(suffix)
	}
	return b.String(), tag
}

// stateOf returns the identity of hit h's state in a check of group.
func stateOf(h sluice.Hit, group string) ident.State {
	l := h.Limit
	return ident.State{Zone: h.Zone, Key: h.Key, Group: group,
		Limit: ident.LimitOf(string(l.Algo()), l.Window, l.Bucket())}
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
