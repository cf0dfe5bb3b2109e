// Package tracing exports OpenTelemetry spans of the decisions "sluice
// serve" takes, over OTLP gRPC. It is off unless the environment asks for
// it (Enabled), as the standard OTEL_* variables do in other services.
//
// A Tracer starts one server span per request of POST /v1/check, GET
// /v1/auth, a proxied request, POST /json and Envoy's ShouldRateLimit,
// continuing the caller's W3C traceparent; the proxy sends sluice's span
// upstream as the parent of the application's. The server adds the outcome
// to it:
//
//	sluice.zones            the zones checked (string list)
//	sluice.domain           the rate-limit domain (ShouldRateLimit)
//	sluice.decision         allowed, denied, or undecided (an error;
//	                        the span's status says its class, as below,
//	                        or no-key)
//	sluice.shadowed         true when a shadow zone would have denied
//	sluice.source           what decided: store, deny-cache, local-view,
//	                        fail-open, fail-closed, fallback
//	sluice.store.duration   the last store call's latency, in seconds
//	sluice.store.error      its error's class: timeout, canceled,
//	                        bad-state, invalid or unavailable
//	sluice.keys             the keys, only of zones with show_keys
//	http.request.method, http.route, http.response.status_code,
//	rpc.system, rpc.service, rpc.method, rpc.grpc.status_code
//
// No span carries a key of a zone without show_keys, a request path or a
// query string: they are client bytes that may identify a person.
package tracing
