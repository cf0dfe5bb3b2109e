package redisstore

import (
	"fmt"
	"strconv"
)

// hitReply is one hit's part of check.lua's reply.
type hitReply struct {
	fits                  bool
	used, usedAfter       float64
	retry, reset, resetAf int64 // µs
}

// checkReply is check.lua's reply, decoded.
type checkReply struct {
	allowed bool  // every non-shadow hit of the call fit
	now     int64 // µs the script decided at
	hits    []hitReply
}

// decodeCheck decodes check.lua's reply for a call of n hits: "allowed",
// "now", then six strings per hit. Any deviation is an error: the store
// never guesses at a reply it does not understand.
func decodeCheck(reply []string, n int) (checkReply, error) {
	if len(reply) != 2+6*n {
		return checkReply{}, fmt.Errorf("check script replied %d values for %d hits, want %d", len(reply), n, 2+6*n)
	}
	var p parser
	r := checkReply{allowed: p.flag(reply[0]), now: p.int(reply[1]), hits: make([]hitReply, n)}
	for i := range n {
		f := reply[2+6*i : 8+6*i]
		r.hits[i] = hitReply{
			fits: p.flag(f[0]), used: p.float(f[1]), retry: p.int(f[2]),
			reset: p.int(f[3]), usedAfter: p.float(f[4]), resetAf: p.int(f[5]),
		}
	}
	if p.err != nil {
		return checkReply{}, fmt.Errorf("check script reply %q: %w", reply, p.err)
	}
	return r, nil
}

// parser parses reply fields, keeping the first error.
type parser struct{ err error }

func (p *parser) flag(s string) bool {
	if s != "0" && s != "1" && p.err == nil {
		p.err = fmt.Errorf("flag %q is not 0 or 1", s)
	}
	return s == "1"
}

func (p *parser) int(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("%q is not an integer", s)
	}
	return v
}

func (p *parser) float(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if (err != nil || v < 0) && p.err == nil {
		p.err = fmt.Errorf("%q is not a number >= 0", s)
	}
	return v
}
