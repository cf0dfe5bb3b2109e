package ident

import "time"

// State identifies one stored state: two hits with equal States share their
// usage in every store, and two with different States never do. It is
// comparable, so it can key a map.
type State struct {
	// Zone is the hit's zone.
	Zone string
	// Key is the hit's key.
	Key string
	// Group is the check's group ("" for none).
	Group string
	// Limit is the part of the hit's limit that names its state.
	Limit Limit
}

// Limit is the part of a limit's identity that names its state: the
// algorithm, the window and the bucket length. Rate, Name and Shadow are
// not part of it.
type Limit struct {
	// Code is the algorithm's Algo.Code; 0 for an unknown algorithm.
	Code byte
	// Window is the window in µs.
	Window int64
	// Bucket is the bucket length in µs: Window unless the algorithm is
	// Bucketed.
	Bucket int64
}

// LimitOf returns the identity of a limit of the named algorithm ("" is
// the default) with window and bucket length (sluice.Limit.Bucket). For an
// algorithm that is not Bucketed, bucket is ignored (the identity's Bucket
// is the window). An unknown algorithm gives Code 0.
func LimitOf(algorithm string, window, bucket time.Duration) Limit {
	a, _ := Lookup(algorithm)
	if !a.Bucketed {
		bucket = window
	}
	return Limit{Code: a.Code, Window: window.Microseconds(), Bucket: bucket.Microseconds()}
}

// Algo returns the limit's algorithm; ok is false for Code 0.
func (l Limit) Algo() (a Algo, ok bool) { return ByCode(l.Code) }
