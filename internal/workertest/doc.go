// Package workertest runs the test binary again as worker processes, for
// tests that need several OS processes (each with its own store,
// connections and call ids) to work on one Redis at once.
//
// A test starts the workers with a job (JSON, in an environment variable),
// waits until each is ready (connected, scripts loaded), lets them all go
// at once and reads each one's result (JSON). The package's TestMain calls
// Main, which turns the process into a worker when the variable is set.
package workertest
