// Package server is the sluice decision service behind "sluice serve": the
// HTTP decision API (POST /v1/check, POST /v1/reset), the nginx
// auth_request endpoint (/v1/auth), the reverse proxy, and the operational
// endpoints (/metrics, /healthz, /readyz), on the listeners of a
// config.Config. The user documentation, with every option, endpoint,
// header and metric, is docs/server.md. With rls.config_dir it also
// serves Envoy's rate-limit API from package rls (grpc listeners, POST
// /json), through the same failure-policy chains as the zones (rls.go);
// docs/envoy.md documents it.
//
// # Structure
//
// OpenStore is the one place a store is built from configuration: the
// memory store, or a Redis store (standalone, Sentinel, Cluster). New
// puts, for a Redis store, one edge.Guard per failure policy in front of
// it (sharing one breaker, with the store timeout) and a deny cache in
// front of each guard; a zone checks through the chain of its policy. An
// async zone (mode: async) checks through an edge.Async in front of its
// policy's guard, one per policy and sync interval, closed (sending what it
// owes) when the server stops. The
// configuration is compiled into an immutable state (zones with their key
// functions from package httplimit, proxy rules with their reverse
// proxies) held in an atomic pointer: a reload swaps it, and a request
// sees one configuration from start to end.
//
// # Decisions where the design was silent
//
//   - A check over several zones (a proxy rule, or /v1/auth?zone=a&zone=b)
//     is one all-or-nothing check and uses the strictest failure policy of
//     its zones: closed, then local, then open.
//   - A memory store cannot be unreachable, so checks go to it directly:
//     no guard, no deny cache (which would only add a lookup).
//   - A Redis store must answer when the server starts: an unreachable
//     Redis at start is an error, so a broken deployment fails loudly
//     instead of running degraded from its first second.
//   - /v1/check answers an unknown zone with 404, malformed input with 400,
//     a body over the listener's max_body_bytes with 413, and a store
//     error the failure policy did not absorb with 503; every one is an
//     application/problem+json body that says what is wrong.
//   - POST endpoints require Content-Type: application/json (415
//     otherwise), so a browser's cross-origin form post cannot reach them.
//     The admin endpoints (config.Admin: reset by default, check and
//     /metrics if listed) move to the admin listener when one is
//     configured (404 on api listeners) and need the bearer token when one
//     is set (401), compared in constant time over SHA-256 digests. The
//     token is read per request from the current state, so a reload
//     rotates it; refused calls are logged at most once per 10 s. The
//     endpoints that change counters (/v1/reset, /v1/top/reset) answer
//     403 while neither an admin listener nor a token protects them,
//     unless admin.open says to serve them to every client
//     (config.Config.ServesReset), and the start-up warnings name every
//     endpoint left open.
//   - The top lists show keys by an HMAC under a secret drawn at start or
//     configured (top.digest_secret_file), so that an ID reveals nothing
//     of a key from a small set.
//   - Error details drop Go package and operation names and hit indexes
//     (publicDetail); a 404 for an unknown zone does not list the zones.
//     The proxy's upstream error line is logged at most once per 10 s,
//     with the count of lines it stands for.
//   - /v1/check echoes each key in its per-limit results (the caller sent
//     them); the proxy's and /v1/auth's 429 bodies never contain a key,
//     which may be a secret token.
//   - /v1/auth denies with 403 by default because nginx's auth_request
//     turns any status but 2xx, 401 and 403 into a 500; nginx maps the 403
//     to 429. ?deny_status= serves proxies that pass any status on. A
//     request without a key for a zone gets 401 (a missing credential).
//     /v1/auth reads the client address from X-Forwarded-For and X-Real-IP
//     as the proxy does (httplimit.ClientAddr), only from loopback peers and
//     trusted_proxies.
//   - The proxy answers a request without a key 400, as the httplimit
//     middleware does; a key source with first_of falls back instead.
//   - A reload changes zones, rules, trusted proxies, proxy headers and the
//     log level. The store and the listeners are kept until a restart (a
//     changed section is logged as a warning), because reopening them
//     would lose in-flight requests and in-memory counters. Settings given
//     by flags or SLUICE_* variables still win over the reloaded file.
//   - The file watcher polls size and modification time (default every
//     2 s); an editor that writes a file in two steps may cause one failed
//     reload, then a good one.
//   - /readyz answers 503, and gRPC health NOT_SERVING, until the store is
//     connected and its scripts loaded (ready.go); a check meanwhile waits
//     for that up to the store timeout. Once ready, /readyz probes the
//     store itself (a zero-cost check of one reserved key, bypassing the
//     breaker) only when some zone fails closed: a server whose zones
//     fail open or local still decides every check.
//   - Metrics live in a registry created per Server; nothing is global.
package server
