package sim

import "math"

// rng is a splitmix64 generator. The trace is defined by this code, not by
// math/rand, whose streams may change between Go versions: a seed gives
// the same trace on every release and platform.
type rng struct{ s uint64 }

// newRNG returns the generator of one stream (a source) of one seed.
// Streams start at unrelated points of the 2^64 cycle.
func newRNG(seed, stream uint64) rng {
	return rng{s: mix64(mix64(seed) ^ mix64(stream+0x632BE59BD9B4E019))}
}

func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	return mix64(r.s)
}

// float returns a uniform float64 in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) * 0x1p-53 }

// uniform returns a uniform float64 in [a, b).
func (r *rng) uniform(a, b float64) float64 { return a + (b-a)*r.float() }

// exp returns an exponential variate with mean 1.
func (r *rng) exp() float64 { return -math.Log(1 - r.float()) }

// pareto returns a Pareto variate with minimum 1 and shape alpha.
func (r *rng) pareto(alpha float64) float64 { return math.Pow(1-r.float(), -1/alpha) }
