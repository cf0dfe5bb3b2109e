package ident

import "github.com/sluicehq/sluice/internal/algo"

// Algo is one algorithm's entry in the table: what the stores and layers
// switch on, in one place.
type Algo struct {
	// Name is the algorithm's name as sluice.Algorithm spells it, such as
	// "sliding-window".
	Name string
	// Code is one lower-case letter: the scripts in redisstore/scripts name
	// the algorithm by it in ARGV, and Redis keys by its upper case (see
	// KeyCode). Never 0.
	Code byte
	// ID is 1 + the algorithm's position in the table: a small number for
	// fingerprints and packed state. Never 0, so 0 can mean "none".
	ID uint8
	// Exact reports that the algorithm decides on integers (log, gcra):
	// its RetryAfter is exact, where the estimators' is a float rounded up
	// to a microsecond.
	Exact bool
	// Bucketed reports that the state is cut into buckets of
	// Limit.Resolution (buckets): the bucket length is part of the
	// identity. For the others LimitOf sets it to the window.
	Bucketed bool
	// New returns the algorithm's empty state.
	New func() algo.State
}

// KeyCode is the letter that names the algorithm in Redis keys: Code in
// upper case. Upper case since the state format of every algorithm
// changed (today a string of packed little-endian doubles, or a sorted set
// for log; it was one formatted string): state an older version wrote
// under the lower-case letters is ignored, and expires, rather than
// misread.
func (a Algo) KeyCode() byte { return a.Code - 'a' + 'A' }

// algos is the table, the default first. Never written.
var algos = [...]Algo{
	{Name: "sliding-window", Code: 'w', ID: 1, New: func() algo.State { return new(algo.Window) }},
	{Name: "buckets", Code: 'b', ID: 2, Bucketed: true, New: func() algo.State { return new(algo.Buckets) }},
	{Name: "log", Code: 'l', ID: 3, Exact: true, New: func() algo.State { return new(algo.Log) }},
	{Name: "decay", Code: 'd', ID: 4, New: func() algo.State { return new(algo.Decay) }},
	{Name: "gcra", Code: 'g', ID: 5, Exact: true, New: func() algo.State { return new(algo.GCRA) }},
}

// Algos returns every algorithm, the default first, in a new slice.
func Algos() []Algo {
	out := algos
	return out[:]
}

// Default is the algorithm of a limit that names none: sliding-window.
func Default() Algo { return algos[0] }

// Lookup returns the algorithm named name; "" is the default. ok is false
// for an unknown name.
func Lookup(name string) (a Algo, ok bool) {
	if name == "" {
		return algos[0], true
	}
	for i := range algos {
		if algos[i].Name == name {
			return algos[i], true
		}
	}
	return Algo{}, false
}

// ByCode returns the algorithm whose Code is code. ok is false for an
// unknown code.
func ByCode(code byte) (a Algo, ok bool) {
	for i := range algos {
		if algos[i].Code == code {
			return algos[i], true
		}
	}
	return Algo{}, false
}
