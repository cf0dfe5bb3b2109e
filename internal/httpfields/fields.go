// Package httpfields writes sluice's HTTP answers: the IETF draft
// RateLimit-Policy and RateLimit fields, Retry-After, and RFC 9457 problem
// bodies, for the httplimit middleware and sluice serve alike. It is
// internal so that httplimit's public API stays what a middleware user
// needs; docs/http.md describes the fields.
package httpfields

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// The canonical names of the response fields, as keys of an http.Header.
const (
	// FieldPolicy is the IETF draft RateLimit-Policy field: the quota
	// policies that apply to the request.
	FieldPolicy = "Ratelimit-Policy"
	// FieldRateLimit is the IETF draft RateLimit field: what is left of
	// each policy's quota.
	FieldRateLimit = "Ratelimit"
	// FieldRetryAfter is RFC 9110's Retry-After, in whole seconds.
	FieldRetryAfter = "Retry-After"
)

// maxSFInteger is the largest Integer a Structured Field may carry
// (RFC 9651, Section 3.3.1).
const maxSFInteger = 999_999_999_999_999

// CeilSeconds returns d in whole seconds, rounded up: 1.2 s is 2. Negative
// durations are 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// AppendPolicy appends the value of the RateLimit-Policy field for c to
// dst: one item per non-shadow hit, in order, such as
// `"10r/m";q=10;w=60, "login";q=5;w=3600`. The item is the limit's Label,
// q its Rate and w its Window in seconds, rounded up. It appends nothing
// when every hit is a shadow hit.
//
// Shadow hits are left out: a limit being tried is not a promise to
// clients. Items are unique within a field, since a client tells policies
// apart by them: when two hits share a label (two zones with equal limits,
// or one limit for several keys), each of them is named zone/label, and a
// repeat of that gets "#N", N the hit's position from 1 (`"a/10r/m",
// "b/10r/m"`). AppendRateLimit and the violated-policies of WriteDenied
// use the same names. Label bytes outside printable ASCII, which a
// Structured Field String cannot carry, are written as '?' (New and sluice
// serve's configuration refuse such names).
func AppendPolicy(dst []byte, c sluice.Check) []byte {
	var buf [sluice.MaxHits]string
	ids := FieldIDs(&buf, c)
	first := true
	for i, h := range c.Hits {
		if c.Shadow || h.Limit.Shadow {
			continue
		}
		dst = appendItem(dst, &first, ids[i])
		dst = AppendParam(dst, ";q=", h.Limit.Rate)
		dst = AppendParam(dst, ";w=", CeilSeconds(h.Limit.Window))
	}
	return dst
}

// FieldIDs returns the identifier of each hit of c in the RateLimit
// fields, in buf when c has at most sluice.MaxHits hits: its Label, made
// unique among the non-shadow hits as AppendPolicy says.
func FieldIDs(buf *[sluice.MaxHits]string, c sluice.Check) []string {
	var ids []string
	if len(c.Hits) <= len(buf) {
		ids = buf[:len(c.Hits)]
	} else {
		ids = make([]string, len(c.Hits))
	}
	shown := func(i int) bool { return !c.Shadow && !c.Hits[i].Limit.Shadow }
	shared := false
	for i, h := range c.Hits {
		ids[i] = h.Limit.Label()
		for j := range i {
			shared = shared || shown(i) && shown(j) && ids[j] == ids[i]
		}
	}
	if !shared {
		return ids
	}
	qualified := make([]bool, len(ids))
	for i := range ids {
		for j := range ids {
			if i != j && shown(i) && shown(j) && c.Hits[i].Limit.Label() == c.Hits[j].Limit.Label() {
				qualified[i] = c.Hits[i].Zone != ""
			}
		}
	}
	for i, q := range qualified {
		if q {
			ids[i] = c.Hits[i].Zone + "/" + ids[i]
		}
	}
	for i := range ids {
		for j := 0; j < i && shown(i); j++ {
			if shown(j) && ids[j] == ids[i] {
				ids[i] += "#" + strconv.Itoa(i+1)
				j = -1 // a longer name: compare it with every earlier one again
			}
		}
	}
	return ids
}

// AppendRateLimit appends the value of the RateLimit field for c and its
// decision d to dst: one item per non-shadow hit, in order, such as
// `"10r/m";r=0;t=12`. r is the hit's Remaining. t is, for a hit that
// denies, its RetryAfter (when the same request could pass again), and
// otherwise its ResetAfter (when the whole quota is back), in seconds
// rounded up. It appends nothing for a decision without hit results (one
// taken by a failure policy) or when every hit is a shadow hit.
func AppendRateLimit(dst []byte, c sluice.Check, d *sluice.Decision) []byte {
	return AppendRateLimitItems(dst, c, d, nil)
}

// AppendRateLimitItems is AppendRateLimit with each hit's label already encoded
// as a Structured Field String in items, or nil to encode them here.
func AppendRateLimitItems(dst []byte, c sluice.Check, d *sluice.Decision, items []string) []byte {
	if len(d.Hits) != len(c.Hits) {
		return dst
	}
	var buf [sluice.MaxHits]string
	var ids []string
	if items == nil {
		ids = FieldIDs(&buf, c)
	}
	first := true
	for i, h := range c.Hits {
		if c.Shadow || h.Limit.Shadow {
			continue
		}
		res := &d.Hits[i]
		wait := res.ResetAfter
		if !res.Allowed {
			wait = res.RetryAfter
		}
		if !first {
			dst = append(dst, ", "...)
		}
		first = false
		if items != nil {
			dst = append(dst, items[i]...)
		} else {
			dst = AppendSFString(dst, ids[i])
		}
		dst = AppendParam(dst, ";r=", res.Remaining)
		dst = AppendParam(dst, ";t=", CeilSeconds(wait))
	}
	return dst
}

// SetFields sets the RateLimit-Policy and RateLimit fields of h for c and
// its decision d, and Retry-After when d denies. A field with no item is
// not set. It allocates the field values; the middleware uses pooled
// buffers instead.
func SetFields(h http.Header, c sluice.Check, d *sluice.Decision) {
	if v := AppendPolicy(nil, c); len(v) > 0 {
		h[FieldPolicy] = []string{string(v)}
	}
	if v := AppendRateLimit(nil, c, d); len(v) > 0 {
		h[FieldRateLimit] = []string{string(v)}
	}
	if !d.Allowed {
		h[FieldRetryAfter] = []string{strconv.FormatInt(RetryAfterSeconds(d), 10)}
	}
}

// RetryAfterSeconds is the Retry-After of a denial in seconds: at least 1, since
// "retry after 0 seconds" invites a client to hammer. A denial without hit
// results (a closed failure policy) also gets 1.
func RetryAfterSeconds(d *sluice.Decision) int64 {
	return max(1, CeilSeconds(d.RetryAfter()))
}

func appendItem(dst []byte, first *bool, label string) []byte {
	if !*first {
		dst = append(dst, ", "...)
	}
	*first = false
	return AppendSFString(dst, label)
}

// AppendParam appends a Structured Field parameter: name (such as ";q=")
// and v, clamped to [0, the largest Structured Field Integer].
func AppendParam(dst []byte, name string, v int64) []byte {
	dst = append(dst, name...)
	return strconv.AppendInt(dst, min(max(v, 0), maxSFInteger), 10)
}

// SFSafe reports whether s is written in a Structured Field String as it
// is: printable ASCII.
func SFSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// AppendSFString appends s as a Structured Field String (RFC 9651, Section
// 3.3.3): quoted, with '"' and '\' escaped; other bytes outside 0x20-0x7E
// become '?'.
func AppendSFString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20 || c > 0x7e:
			dst = append(dst, '?')
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
