package httpfields

import (
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
)

// QuotaExceeded is the problem type of a denial, defined by the IETF
// RateLimit fields draft. Its extension member "violated-policies" lists
// the names of the policies whose quota is used up.
const QuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// A Problem is an RFC 9457 problem details object, written as
// application/problem+json.
type Problem struct {
	// Type is a URI naming the problem type. Empty means "about:blank":
	// the problem is described by the status code alone.
	Type string
	// Title is a short summary of the problem type.
	Title string
	// Status is the HTTP status code.
	Status int
	// Detail explains this occurrence. Optional.
	Detail string
	// ViolatedPolicies is the quota-exceeded extension member: the names
	// of the policies whose quota is used up. Omitted when empty.
	ViolatedPolicies []string
}

// WriteProblem writes p as the response: the status, Content-Type
// application/problem+json, Cache-Control no-store, and the JSON body.
// Fields already set on w.Header(), such as Retry-After, are kept.
func WriteProblem(w http.ResponseWriter, p *Problem) {
	WriteProblemBuf(w, p, nil)
}

// WriteProblemBuf is WriteProblem encoding into buf, which it returns
// grown, so that a caller can pool it.
func WriteProblemBuf(w http.ResponseWriter, p *Problem, buf []byte) []byte {
	buf = p.AppendJSON(buf[:0])
	h := w.Header()
	h["Content-Type"] = []string{"application/problem+json"}
	h["Cache-Control"] = []string{"no-store"}
	h["Content-Length"] = []string{strconv.Itoa(len(buf))}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(p.Status)
	w.Write(buf)
	return buf
}

// AppendJSON appends p's JSON encoding to dst.
func (p *Problem) AppendJSON(dst []byte) []byte {
	typ := p.Type
	if typ == "" {
		typ = "about:blank"
	}
	dst = append(dst, `{"type":`...)
	dst = appendJSONString(dst, typ)
	dst = append(dst, `,"title":`...)
	dst = appendJSONString(dst, p.Title)
	dst = append(dst, `,"status":`...)
	dst = strconv.AppendInt(dst, int64(p.Status), 10)
	if p.Detail != "" {
		dst = append(dst, `,"detail":`...)
		dst = appendJSONString(dst, p.Detail)
	}
	if len(p.ViolatedPolicies) > 0 {
		dst = append(dst, `,"violated-policies":[`...)
		for i, v := range p.ViolatedPolicies {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, v)
		}
		dst = append(dst, ']')
	}
	return append(dst, "}\n"...)
}

// WriteDenied answers a denied check: status (429 unless the caller needs
// another, such as 403 for nginx auth_request), Retry-After, the
// RateLimit-Policy and RateLimit fields, and a quota-exceeded problem
// whose violated-policies name the non-shadow hits that denied, as the
// RateLimit fields do. The body never contains the key: it may be a secret token.
func WriteDenied(w http.ResponseWriter, status int, c sluice.Check, d *sluice.Decision) {
	SetFields(w.Header(), c, d)
	p := DeniedProblem(status, c, d, nil, nil)
	WriteProblem(w, &p)
}

// DeniedProblem builds the problem of a denial, appending the violated
// policies to violated[:0]. labels holds the hits' identifiers in the
// RateLimit fields (FieldIDs), or is nil to compute them.
func DeniedProblem(status int, c sluice.Check, d *sluice.Decision, violated, labels []string) Problem {
	violated = violated[:0]
	var buf [sluice.MaxHits]string
	if labels == nil {
		labels = FieldIDs(&buf, c)
	}
	for i, h := range c.Hits {
		if i >= len(d.Hits) || d.Hits[i].Allowed || d.Hits[i].Shadow || c.Shadow || h.Limit.Shadow {
			continue
		}
		violated = append(violated, labels[i])
	}
	detail := "the rate limit is exceeded; retry after " + strconv.FormatInt(RetryAfterSeconds(d), 10) + " s"
	if d.Source == sluice.FromFailClosed {
		detail = "the rate limiter is unavailable and denies requests until it is back; retry after 1 s"
	}
	return Problem{
		Type:             QuotaExceeded,
		Title:            "Quota exceeded",
		Status:           status,
		Detail:           detail,
		ViolatedPolicies: violated,
	}
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
