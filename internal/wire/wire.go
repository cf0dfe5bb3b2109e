package wire

// The API's paths.
const (
	CheckPath = "/v1/check"
	ResetPath = "/v1/reset"
)

// Request is the body of POST /v1/check and POST /v1/reset.
type Request struct {
	// Zone names a configured zone. Required.
	Zone string `json:"zone"`
	// Key is the key to check; Keys several keys checked together, all or
	// nothing. Exactly one of them.
	Key  string   `json:"key,omitempty"`
	Keys []string `json:"keys,omitempty"`
	// Cost is what the check spends; absent means 1, 0 peeks. A reset
	// takes none.
	Cost *int64 `json:"cost,omitempty"`
}

// Response is the body of a /v1/check answer, 200 (allowed) or 429
// (denied).
type Response struct {
	// Allowed is the decision.
	Allowed bool `json:"allowed"`
	// Zone is the zone checked.
	Zone string `json:"zone"`
	// Source is what decided (sluice.Source's String): "store", or how the
	// failure policy decided without it.
	Source string `json:"source"`
	// Shadowed is true when a shadow limit would have denied.
	Shadowed bool `json:"shadowed"`
	// RetryAfter is how long to wait before a retry can be allowed, in
	// seconds; 0 when allowed.
	RetryAfter float64 `json:"retry_after"`
	// Limits are the results per key and limit, keys in request order and
	// each key's limits in zone order; empty when decided without the
	// store.
	Limits []Limit `json:"limits"`
}

// Limit is one key's result under one limit.
type Limit struct {
	// Key is the key, as the request sent it.
	Key string `json:"key"`
	// Name is the limit's name, or its spec when it has none.
	Name string `json:"name"`
	// Limit is the limit's spec, such as "10r/m".
	Limit string `json:"limit"`
	// Algorithm is the limit's algorithm.
	Algorithm string `json:"algorithm"`
	// Allowed tells whether this limit alone allows the check.
	Allowed bool `json:"allowed"`
	// Shadow marks a shadow limit, which never denies.
	Shadow bool `json:"shadow"`
	// Used is the count in the window, after the check if it was recorded.
	// Fractional for algorithms that weigh the past (sliding-window, decay).
	Used float64 `json:"used"`
	// Remaining is the limit's rate minus Used, rounded down, at least 0.
	Remaining int64 `json:"remaining"`
	// RetryAfter is how long until this limit would allow the check, in
	// seconds; 0 when it does.
	RetryAfter float64 `json:"retry_after"`
	// ResetAfter is how long until the key's state under this limit is
	// empty again, in seconds.
	ResetAfter float64 `json:"reset_after"`
}
