package sim

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/internal/algo"
)

// model is the exact form of what an algorithm promises, replayed on the
// history the algorithm recorded: the algorithm is correct when its verdicts
// and usages match its model's. The window algorithms (sliding-window,
// buckets, log) promise the exact sliding window and use the exact
// reference itself; decay and gcra promise other things, each with its own
// model here, computed differently from internal/algo.
type model interface {
	reset()
	// used returns the usage at now, before a request.
	used(now int64) float64
	// fits reports whether a request of cost 1 fits at now.
	fits(now int64) bool
	// record adds a request at now.
	record(now int64)
}

// Models are the names Report uses for what an algorithm promises.
const (
	modelWindow = "exact window"
	modelAR1    = "AR1 count"
	modelGCRA   = "GCRA (TAT)"
)

// modelName returns the name of what the named algorithm promises.
func modelName(algorithm string) string {
	switch algorithm {
	case "decay":
		return modelAR1
	case "gcra":
		return modelGCRA
	}
	return modelWindow
}

// newModel returns the exact model of the named algorithm under p, or nil
// when the model is the exact window.
func newModel(algorithm string, p algo.Params) model {
	switch algorithm {
	case "decay":
		return &ar1{w: float64(p.Window), rate: float64(p.Rate)}
	case "gcra":
		return &gcraModel{rate: p.Rate, window: p.Window}
	}
	return nil
}

// ar1 is decay's promise, an exponentially decayed count with time constant
// W, S(now) = Σ exp(−(now − tᵢ)/W) over the recorded instants, with no
// cut-off. It keeps the sum relative to a base instant, rebased every 16
// windows (so every term stays under e¹⁶), where algo.Decay decays its
// state at every request and counts a state under algo.DecayZero as empty.
type ar1 struct {
	w, rate float64
	base    int64
	sum     float64 // Σ exp((tᵢ − base)/W)
}

func (m *ar1) reset() { m.base, m.sum = 0, 0 }

func (m *ar1) used(now int64) float64 { return m.sum * math.Exp(-float64(now-m.base)/m.w) }

// fits holds the model to S + 1 ≤ Rate, with no slack.
func (m *ar1) fits(now int64) bool { return m.used(now)+1 <= m.rate }

func (m *ar1) record(now int64) {
	if m.sum == 0 || float64(now-m.base) > 16*m.w {
		m.sum, m.base = m.used(now), now
	}
	m.sum += math.Exp(float64(now-m.base) / m.w)
}

// gcraModel is GCRA's promise in exact integer arithmetic: the theoretical
// arrival time TAT = q + r/Rate µs (0 ≤ r < Rate), the emission interval
// T = W/Rate, a burst of Rate. A request fits at now when
// max(TAT, now) + T − now ≤ W, and recording it sets
// TAT = max(TAT, now) + T. algo.GCRA computes the same in float64.
type gcraModel struct {
	rate, window int64
	q, r         int64
}

func (m *gcraModel) reset() { m.q, m.r = 0, 0 }

// from returns max(TAT, now) as (q, r).
func (m *gcraModel) from(now int64) (q, r int64) {
	if m.q < now {
		return now, 0
	}
	return m.q, m.r
}

// scaled returns (max(TAT, now) − now)·Rate: the cost in flight times W.
func (m *gcraModel) scaled(now int64) int64 {
	q, r := m.from(now)
	return (q-now)*m.rate + r
}

func (m *gcraModel) used(now int64) float64 {
	return float64(m.scaled(now)) / float64(m.window)
}

func (m *gcraModel) fits(now int64) bool { return m.scaled(now)+m.window <= m.window*m.rate }

func (m *gcraModel) record(now int64) {
	q, r := m.from(now)
	q, r = q+m.window/m.rate, r+m.window%m.rate
	if r >= m.rate {
		q, r = q+1, r-m.rate
	}
	m.q, m.r = q, r
}

// maxModelProduct bounds Window × Rate so that gcraModel's integers cannot
// overflow: its scaled usage stays under (Window + T) × Rate.
const maxModelProduct = math.MaxInt64 / 4

func validModel(rate, window int64) error {
	if window > maxModelProduct/rate {
		return fmt.Errorf("sim: limit %d per %d µs: window × rate exceeds %d, too large for the exact GCRA model", rate, window, int64(maxModelProduct))
	}
	return nil
}

// worstWindow returns the largest number of the instants at (ascending)
// that any window (s − w, s] of length w holds, over every position s: the
// worst true window. A window holding the most instants can be slid right
// until its end is one of them, so it is enough to look at the windows
// ending at each instant; the start pointer only moves forward, so the
// pass is linear.
func worstWindow(at []int64, w int64) int64 {
	best, i := 0, 0
	for j, t := range at {
		for at[i] <= t-w {
			i++
		}
		best = max(best, j-i+1)
	}
	return int64(best)
}
