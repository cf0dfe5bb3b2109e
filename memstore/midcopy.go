//go:build !memstore_hooks

package memstore

// midCopy is called by peek between the first word of its copy of e's
// state and the others. Here it does nothing and compiles to nothing: the
// hot path is the same as without the call. Builds tagged memstore_hooks
// (midcopy_hooks.go) let a test run a writer at that point, so that a
// reader that did not validate its copy would decide on a torn state
// (TestLockFreeMatchesLocked).
func midCopy(*entry) {}
