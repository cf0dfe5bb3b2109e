//go:build memstore_hooks

package memstore

// midCopyHook, when not nil, is called by peek between the first word of
// its copy of e's state and the others, in the reader's goroutine. Only
// tests set it, and only in builds tagged memstore_hooks: see midcopy.go.
var midCopyHook func(e *entry)

func midCopy(e *entry) {
	if midCopyHook != nil {
		midCopyHook(e)
	}
}
