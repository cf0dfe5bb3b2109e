// Package rls serves Envoy's global rate-limit API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) from
// envoyproxy/ratelimit's YAML rule files, deciding every request with one
// sluice check. It is the only package of sluice that imports Envoy's
// protos. The user documentation, with a migration guide, is
// docs/envoy.md.
//
// LoadDir reads a directory of rule files into Rules; New builds a
// Service over them and a limiter per failure policy (the server's
// chains); NewGRPCServer serves it with gRPC health and reflection;
// ServeJSON is envoyproxy/ratelimit's HTTP POST /json.
//
// # Matching
//
// As envoyproxy/ratelimit documents and does: in each level of
// descriptors, the exact key and value first, then wildcard values
// ("foo*", a prefix) in file order, then the key alone; a limit applies
// only when the request descriptor has exactly as many entries as the
// path to the rule. A matched limit whose name another matched limit
// replaces is dropped from the request (answered OK, without a limit, and
// not counted). An unlimited rule answers OK with limit_remaining
// MaxUint32 without the store; a descriptor no rule matches answers OK
// without current_limit.
//
// # Decisions where envoyproxy/ratelimit and sluice differ
//
//   - One all-or-nothing check. Every descriptor with a limit becomes one
//     hit of a single sluice.Check; when any non-shadow hit is over its
//     limit the request is OVER_LIMIT and nothing is recorded on any
//     descriptor. envoyproxy/ratelimit increments every counter, also on
//     denial.
//   - One cost per request. hits_addend 0 in the request is "unset" in
//     proto3 and counts 1 (Envoy always sends it). A descriptor's own
//     hits_addend (a wrapper, so 0 is distinguishable) overrides it; 0
//     peeks. Since one check has one cost, descriptors with a limit that
//     ask for different addends are refused with InvalidArgument instead
//     of being split into checks that could half succeed; send them in
//     separate requests.
//   - requests_per_unit 0, or an addend above the limit, can never pass:
//     such a descriptor is OVER_LIMIT without asking the store (0
//     remaining, a window's duration_until_reset), and the other
//     descriptors are peeked (cost 0) to report their state.
//   - Descriptors that select one counter (Envoy sends a descriptor twice
//     when a route and its virtual host both carry the action) are one
//     hit charged the sum of their costs, as envoyproxy/ratelimit charges
//     each occurrence; each reports the count as of its own charge.
//   - Sliding windows by default (the domain file's sluice field
//     "algorithm" selects another: buckets, log, decay, gcra), so
//     duration_until_reset is, for a descriptor over its limit, the
//     RetryAfter of sluice (when the same request would pass) and,
//     otherwise, its ResetAfter (when usage has decayed to zero).
//   - The domain file's sluice field "failure" (open, closed, local)
//     chooses the failure policy. Under open and local a request decided
//     without the store is OK; under closed it is OVER_LIMIT. Either way
//     it carries current_limit but no limit_remaining.
//   - share_threshold (on a wildcard descriptor) makes every value the
//     wildcard matches count on one counter. detailed_metric and
//     value_to_metric put the digest of the request's value
//     (internal/keyname) in the rule label of the metrics where the README
//     puts the value, for at most MaxMetricValues labels; past it a
//     descriptor is counted under its rule's configured path.
//     quota_mode is refused: its violations are reported only in
//     dynamic metadata, which sluice does not send.
//   - A descriptor's limit override (RateLimitDescriptor.limit) is used
//     whatever the rules say, as in envoyproxy/ratelimit, with every unit
//     and unit_multiplier. is_negative_hits is ignored.
//   - The units are second, minute, hour, day and, as envoyproxy/ratelimit
//     reads them (utils.UnitToDivider), week, month and year as fixed 7,
//     30 and 365 days: sliding windows of those lengths.
//   - Any number of descriptors with a limit up to MaxLimitedDescriptors:
//     more than sluice.MaxHits are decided as several checks (checkAll),
//     all or nothing unless usage changes between its peek and its
//     checks. Past MaxLimitedDescriptors the request is OVER_LIMIT without
//     the store, never an error that Envoy's default failure_mode_deny:
//     false would let through.
//   - Options.Shadow (rls.shadow_mode) is envoyproxy/ratelimit's global
//     SHADOW_MODE: requests are decided and counted as usual, every
//     descriptor keeps its code, and only overall_code is OK.
//   - Options.ResponseHeaders adds envoyproxy/ratelimit's RateLimit-Limit,
//     RateLimit-Remaining and RateLimit-Reset of the descriptor closest to
//     its limit.
//
// internal/rls/difftest compares these answers with the real
// envoyproxy/ratelimit's, request by request.
//
// Counters live in sluice zone "rls/<domain>", keyed by the descriptor's
// entries, so they never meet a sluice zone's keys.
package rls
