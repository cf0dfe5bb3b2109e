package wire

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// AppendResponse appends r as JSON, followed by a newline, without
// allocating beyond dst. encoding/json decodes it back into r (numbers
// are written in their shortest decimal form, NaN and infinities as 0).
func AppendResponse(dst []byte, r *Response) []byte {
	dst = append(dst, `{"allowed":`...)
	dst = strconv.AppendBool(dst, r.Allowed)
	dst = append(dst, `,"zone":`...)
	dst = AppendString(dst, r.Zone)
	dst = append(dst, `,"source":`...)
	dst = AppendString(dst, r.Source)
	dst = append(dst, `,"shadowed":`...)
	dst = strconv.AppendBool(dst, r.Shadowed)
	dst = append(dst, `,"retry_after":`...)
	dst = appendNumber(dst, r.RetryAfter)
	dst = append(dst, `,"limits":[`...)
	for i := range r.Limits {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendLimit(dst, &r.Limits[i])
	}
	return append(dst, "]}\n"...)
}

func appendLimit(dst []byte, l *Limit) []byte {
	dst = append(dst, `{"key":`...)
	dst = AppendString(dst, l.Key)
	dst = append(dst, `,"name":`...)
	dst = AppendString(dst, l.Name)
	dst = append(dst, `,"limit":`...)
	dst = AppendString(dst, l.Limit)
	dst = append(dst, `,"algorithm":`...)
	dst = AppendString(dst, l.Algorithm)
	dst = append(dst, `,"allowed":`...)
	dst = strconv.AppendBool(dst, l.Allowed)
	dst = append(dst, `,"shadow":`...)
	dst = strconv.AppendBool(dst, l.Shadow)
	dst = append(dst, `,"used":`...)
	dst = appendNumber(dst, l.Used)
	dst = append(dst, `,"remaining":`...)
	dst = strconv.AppendInt(dst, l.Remaining, 10)
	dst = append(dst, `,"retry_after":`...)
	dst = appendNumber(dst, l.RetryAfter)
	dst = append(dst, `,"reset_after":`...)
	dst = appendNumber(dst, l.ResetAfter)
	return append(dst, '}')
}

// AppendRequest appends the JSON of a Request for one key with an explicit
// cost, as the load generator sends it on every request, without
// allocating beyond dst.
func AppendRequest(dst []byte, zone, key string, cost int64) []byte {
	dst = append(dst, `{"zone":`...)
	dst = AppendString(dst, zone)
	dst = append(dst, `,"key":`...)
	dst = AppendString(dst, key)
	dst = append(dst, `,"cost":`...)
	dst = strconv.AppendInt(dst, cost, 10)
	return append(dst, '}')
}

// appendNumber appends f as a JSON number in its shortest decimal form;
// NaN and infinities, which JSON cannot carry, are written as 0.
func appendNumber(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, '0')
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// AppendString appends s as a JSON string that decodes to what
// encoding/json's encoding of s decodes to: control characters, quotes,
// backslashes, U+2028 and U+2029 escaped, and each byte of invalid UTF-8
// replaced by U+FFFD (HTML characters are not escaped).
func AppendString(dst []byte, s string) []byte {
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
