// Package httplimit is net/http middleware that rate-limits requests with
// any sluice.Limiter, and the pieces the sluice server shares with it: key
// functions, the response fields, and problem details.
//
//	limits, _ := sluice.ParseLimits("10r/s, 1000r/h")
//	mw, err := httplimit.New(store, limits, httplimit.Options{
//		Key: httplimit.Header("X-API-Key"),
//	})
//	...
//	http.ListenAndServe(addr, mw.Wrap(handler))
//
// # Keys
//
// A KeyFunc says who a request is counted against: ClientAddr (the client's
// IP address, reading X-Forwarded-For only from listed trusted proxies),
// Header, Query, Cookie, and two ways to compose them: Combine (every part,
// joined) and FirstOf (the first part present). A request without a key is
// answered 400; to limit callers without a token by their address instead,
// use FirstOf(Header("X-API-Key"), ClientAddr(trusted)).
//
// Decisions about keys: ClientAddr believes X-Forwarded-For (read from the
// right) and, failing that, X-Real-IP only from listed trusted proxies; two
// that disagree, or garbage written by a trusted proxy, are no key rather
// than a made-up one.
// Combine escapes '|' and '\' in its parts so that different combinations
// never share a key; FirstOf prefixes the key with the index of the source
// that produced it ("0:", "1:") so that a token can never equal an address.
// A key longer than sluice.MaxKeyLen is treated as no key (400) rather than
// hashed: such a request is malformed, not a client to count.
//
// # Responses
//
// A denied request gets 429 (Options.DenyStatus) with:
//
//   - Retry-After: the decision's RetryAfter in whole seconds, rounded up,
//     and at least 1: a Retry-After of 0 invites a client to retry at once.
//   - RateLimit-Policy and RateLimit, the fields of the IETF draft
//     draft-ietf-httpapi-ratelimit-headers (revision 11 at the time of
//     writing), one item per limit named by its Label:
//     RateLimit-Policy: "10r/m";q=10;w=60 and RateLimit: "10r/m";r=0;t=12.
//     q is the limit's Rate and w its Window in seconds; r is Remaining and
//     t, in seconds, is RetryAfter for a limit that denies (when the same
//     request may pass again) and ResetAfter otherwise (when the whole
//     quota is back). Windows shorter than a second, or not a whole number
//     of seconds, are rounded up.
//   - An RFC 9457 application/problem+json body of the draft's
//     quota-exceeded type, with "violated-policies". The body never echoes
//     the key, which may be a secret token.
//
// Allowed requests carry the two RateLimit fields too unless
// Options.OmitAllowedFields is set. Shadow limits (sluice.Limit.Shadow)
// appear in no field: a limit on trial is not a promise to clients.
//
// # Errors
//
// A denial is a result; an error from the limiter means it could not
// decide. The middleware answers ErrNoKey and sluice.ErrInvalid with 400
// and anything else (store unreachable, timeout) with 503, logging the
// error; Options.OnError replaces that. It does not implement a failure
// policy itself: wrap the limiter in one (package edge) to fail open,
// closed or to a local limiter; such a limiter returns a degraded
// decision rather than an error, which the middleware follows like any
// other (a fail-closed denial gets 429 and Retry-After: 1, and no
// RateLimit field since the store said nothing).
//
// The 503 detail does not repeat the store's error, which may name
// internal addresses; the log has it. The 400 detail does say what is
// missing ("no X-Api-Key header").
//
// The middleware adds no timeout of its own: a store call is bounded by the
// request's context and by the store's own timeouts.
//
// # Cost
//
// An allowed request allocates the RateLimit field value (two small
// allocations) plus whatever the KeyFunc allocates (none for Header, one
// for ClientAddr); the check's hits and decision are pooled, and the
// RateLimit-Policy value is computed once.
package httplimit
