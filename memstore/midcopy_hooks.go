//go:build memstore_hooks

package memstore

// midCopyHook and midPublishHook, when not nil, are called by midCopy and
// midPublish (see midcopy.go), in the reader's or the writer's goroutine.
// Only tests set them, and only in builds tagged memstore_hooks.
var midCopyHook, midPublishHook func(e *entry)

func midCopy(e *entry) {
	if midCopyHook != nil {
		midCopyHook(e)
	}
}

func midPublish(e *entry) {
	if midPublishHook != nil {
		midPublishHook(e)
	}
}
