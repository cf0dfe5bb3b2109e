package server

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
)

// appendDecision appends the JSON body of a /v1/check answer for zone z,
// the check c and its decision d: the shape of checkResponse, written by
// hand because it is on every request's path.
func appendDecision(dst []byte, z *zone, c sluice.Check, d *sluice.Decision) []byte {
	retry := d.RetryAfter().Seconds()
	dst = append(dst, `{"allowed":`...)
	dst = strconv.AppendBool(dst, d.Allowed)
	dst = append(dst, `,"zone":`...)
	dst = appendJSONString(dst, z.cfg.Name)
	dst = append(dst, `,"source":`...)
	dst = appendJSONString(dst, d.Source.String())
	dst = append(dst, `,"shadowed":`...)
	dst = strconv.AppendBool(dst, d.Shadowed)
	dst = append(dst, `,"retry_after":`...)
	dst = appendNumber(dst, retry)
	dst = append(dst, `,"limits":[`...)
	for i, h := range d.Hits {
		if i > 0 {
			dst = append(dst, ',')
		}
		l := i % len(z.cfg.Limits)
		dst = append(dst, `{"key":`...)
		dst = appendJSONString(dst, c.Hits[i].Key)
		dst = append(dst, `,"name":`...)
		dst = appendJSONString(dst, z.labels[l])
		dst = append(dst, `,"limit":`...)
		dst = appendJSONString(dst, z.specs[l])
		dst = append(dst, `,"algorithm":`...)
		dst = appendJSONString(dst, string(z.cfg.Limits[l].Algo()))
		dst = append(dst, `,"allowed":`...)
		dst = strconv.AppendBool(dst, h.Allowed)
		dst = append(dst, `,"shadow":`...)
		dst = strconv.AppendBool(dst, h.Shadow)
		dst = append(dst, `,"used":`...)
		dst = appendNumber(dst, h.Used)
		dst = append(dst, `,"remaining":`...)
		dst = strconv.AppendInt(dst, h.Remaining, 10)
		dst = append(dst, `,"retry_after":`...)
		dst = appendNumber(dst, h.RetryAfter.Seconds())
		dst = append(dst, `,"reset_after":`...)
		dst = appendNumber(dst, h.ResetAfter.Seconds())
		dst = append(dst, '}')
	}
	return append(dst, "]}\n"...)
}

// appendNumber appends f as a JSON number in its shortest decimal form;
// NaN and infinities, which JSON cannot carry, are written as 0.
func appendNumber(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, '0')
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// appendJSONString appends s as a JSON string, as encoding/json writes it:
// control characters, quotes, backslashes, U+2028 and U+2029 escaped, and
// each byte of invalid UTF-8 replaced by U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			if r == utf8.RuneError {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
