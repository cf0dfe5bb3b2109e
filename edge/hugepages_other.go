//go:build !linux

package edge

import "unsafe"

// adviseHugePages does nothing outside Linux.
func adviseHugePages(unsafe.Pointer, uintptr) {}
