//go:build !memstore_hooks

package memstore

// midCopy is called by peek between the first word of its copy of e's
// state and the others, and midPublish by a holder of e's lock between
// the first word it stores of e's state and the others. Here they do
// nothing and compile to nothing: the hot paths are the same as without
// the calls. Builds tagged memstore_hooks (midcopy_hooks.go) let a test
// run a writer in the middle of a reader's copy, and a reader in the
// middle of a writer's stores, so that a reader that did not validate
// its copy would decide on a torn state (TestLockFreeMatchesLocked).
func midCopy(*entry) {}

func midPublish(*entry) {}
