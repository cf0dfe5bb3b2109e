// Package difftest holds the differential test of sluice's Envoy
// rate-limit API against the real envoyproxy/ratelimit: both servers read
// one rule directory, each on its own Redis, and get the same requests
// over gRPC ShouldRateLimit and POST /json; every answer is compared, and
// the differences docs/envoy.md lists ("What differs") are pinned, so a
// new difference, or one that goes away, fails the test. Rule files that
// envoyproxy/ratelimit's own checker (config_check_cmd) loads or refuses
// are compared with rls.LoadDir the same way.
//
// envoyproxy/ratelimit is built with go install at Version into the user's
// cache directory (or the directory $SLUICE_RATELIMIT_BIN_DIR names) once,
// then reused. When it cannot be built the test is skipped, or fails
// under CI=true.
package difftest

// Version is the envoyproxy/ratelimit version compared, a pseudo-version of
// its main branch (commit 3fb7025).
const Version = "v1.4.1-0.20260122083618-3fb702589d36"
