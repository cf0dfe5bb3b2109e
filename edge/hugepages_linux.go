package edge

import (
	"syscall"
	"unsafe"
)

// hugePage is the size of a transparent huge page on amd64 and arm64.
const hugePage = 2 << 20

// adviseHugePages asks the kernel to back the whole 2 MiB pages of the n
// bytes at p with huge pages, before they are first touched: the
// first-sight table is read at random, one set per new key, and with 4 KiB
// pages nearly every such read also misses the TLB (a page walk costs
// several more cache misses, more under a hypervisor). Advice only: where
// transparent huge pages are off, nothing changes.
func adviseHugePages(p unsafe.Pointer, n uintptr) {
	start := (uintptr(p) + hugePage - 1) &^ (hugePage - 1)
	end := (uintptr(p) + n) &^ (hugePage - 1)
	if end <= start {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), end-start)
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE)
}
