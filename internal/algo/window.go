package algo

import "math/bits"

// Window is the sliding-window state: Cloudflare's two counters. Windows are
// aligned: window i covers [i·W, (i+1)·W).
//
//	Used = Prev·(W − elapsed)/W + Cur
//
// where elapsed = now − i·W: the previous window's events are assumed to be
// spread evenly, and the share of them still inside (now − W, now] counts.
type Window struct {
	Index int64 // i of the window Cur counts
	Cur   int64 // cost recorded in window Index
	Prev  int64 // cost recorded in window Index−1
}

// at returns the window index and counters as seen from now (rolled
// forward, not stored) and the µs elapsed in that window. A clock behind the
// state's window (a step back, or another process's clock) is read as the
// start of the state's window, so nothing recorded is forgotten and the
// estimate errs towards denying.
func (s *Window) at(p Params, now int64) (i, prev, cur, elapsed int64) {
	if start, ok := startOf(s.Index, p.Window, now); ok && now-start < p.Window {
		// Still in the state's window (most checks): i is Index, found
		// without dividing.
		return s.Index, s.Prev, s.Cur, now - start
	}
	i = floorDiv(now, p.Window)
	elapsed = now - i*p.Window
	switch {
	case i < s.Index:
		return s.Index, s.Prev, s.Cur, 0
	case i == s.Index:
		return i, s.Prev, s.Cur, elapsed
	case i == s.Index+1:
		return i, s.Cur, 0, elapsed
	}
	return i, 0, 0, elapsed
}

func windowUsed(prev, cur, elapsed, w int64) float64 {
	return float64(prev)*float64(w-elapsed)/float64(w) + float64(cur)
}

// Eval implements State.
func (s *Window) Eval(p Params, now, cost int64) Result {
	_, prev, cur, e := s.at(p, now)
	r := Result{Used: windowUsed(prev, cur, e, p.Window), ResetAfter: windowReset(prev, cur, e, p.Window)}
	if r.Allowed = fits(r.Used, cost, p.Rate); !r.Allowed {
		r.RetryAfter = windowRetry(prev, cur, e, p.Window, p.Rate, cost)
	}
	return r
}

// windowRetry solves Prev·(W − e − t)/W + Cur + cost ≤ Rate for the least t,
// first within the current window, then in the next one (where Cur has
// become Prev). Two windows later everything is forgotten and any cost ≤
// Rate fits.
func windowRetry(prev, cur, e, w, rate, cost int64) int64 {
	left := w - e // µs until the next window
	if room := rate - cur - cost; prev > 0 && room >= 0 {
		if t := float64(left) - float64(room)*float64(w)/float64(prev); t < float64(left) {
			return ceilMicros(t)
		}
	}
	if cur+cost <= rate {
		return left
	}
	return left + ceilMicros(float64(w)-float64(rate-cost)*float64(w)/float64(cur))
}

func windowReset(prev, cur, e, w int64) int64 {
	switch {
	case cur > 0:
		return 2*w - e
	case prev > 0:
		return w - e
	}
	return 0
}

// Record implements State.
func (s *Window) Record(p Params, now, cost int64) (float64, int64) {
	i, prev, cur, e := s.at(p, now)
	s.Index, s.Prev, s.Cur = i, prev, cur+cost
	return windowUsed(s.Prev, s.Cur, e, p.Window), windowReset(s.Prev, s.Cur, e, p.Window)
}

// startOf returns i·length, the start of interval i, when it is at most
// now and neither i, now nor the product is out of the int64 range's
// non-negative half: then now lies in interval i iff now − start < length.
// One multiplication, where finding i from now takes a division.
func startOf(i, length, now int64) (start int64, ok bool) {
	if i < 0 || now < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(i), uint64(length))
	if hi != 0 || lo > uint64(now) {
		return 0, false
	}
	return int64(lo), true
}

// floorDiv is a/b rounded toward minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// Check is Decide for one hit on s: Eval, then Record when the hit is
// allowed (or shadow) and cost > 0.
// (check, written out on the concrete type so that s does not escape.)
func (s *Window) Check(p Params, now, cost int64, shadow bool) Outcome {
	r := s.Eval(p, now, cost)
	o := Outcome{Allowed: r.Allowed, Used: r.Used, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
	if (r.Allowed || shadow) && cost > 0 {
		o.Used, o.ResetAfter = s.Record(p, now, cost)
	}
	return o
}
