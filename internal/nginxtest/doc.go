// Package nginxtest starts a real nginx for integration tests: on a free
// loopback port, in the foreground, with a generated configuration and
// every file in a temporary directory.
//
// nginx cannot listen on port 0, so Start picks a free port, writes it into
// the configuration and retries with another if nginx loses the race for
// it. nginx runs with master_process off: one process that never changes
// user, so the tests run the same as root (CI containers) and as a normal
// user, and never touch /var/lib/nginx, /var/log/nginx or /run. The
// Debian package's compiled-in temp paths are all overridden for that
// reason.
//
// Without nginx, Require skips the test on a developer's machine and fails
// it when CI=true: scripts/test installs the Debian package, so a missing
// nginx in CI is a broken setup, not a reason to pass.
package nginxtest
