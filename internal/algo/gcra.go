package algo

// GCRA is the generic cell rate algorithm's state: the theoretical arrival
// time. With emission interval T = W/Rate and a burst of Rate, a cost c
// fits when max(TAT, now) + c·T − now ≤ W; recording sets
// TAT = max(TAT, now) + c·T. Used is (TAT − now)/T, the cost still "in
// flight".
type GCRA struct {
	TAT float64 // µs since the epoch; 0 when fresh
}

// Eval implements State.
func (s *GCRA) Eval(p Params, now, cost int64) Result {
	t := float64(p.Window) / float64(p.Rate)
	tat := max(s.TAT, float64(now))
	r := Result{Used: (tat - float64(now)) / t, ResetAfter: ceilMicros(tat - float64(now))}
	if r.Allowed = fits(r.Used, cost, p.Rate); !r.Allowed {
		r.RetryAfter = ceilMicros(tat + float64(cost)*t - float64(p.Window) - float64(now))
	}
	return r
}

// Record implements State.
func (s *GCRA) Record(p Params, now, cost int64) (float64, int64) {
	t := float64(p.Window) / float64(p.Rate)
	s.TAT = max(s.TAT, float64(now)) + float64(cost)*t
	return (s.TAT - float64(now)) / t, ceilMicros(s.TAT - float64(now))
}
