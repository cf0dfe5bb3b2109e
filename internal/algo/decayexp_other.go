//go:build !amd64

package algo

import "math"

// decayExp is math.Exp: the inlined copy of amd64's (decayexp_amd64.go)
// has no counterpart here.
func decayExp(x float64) float64 { return math.Exp(x) }
