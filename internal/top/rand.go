package top

import _ "unsafe" // for go:linkname

// cheaprand returns 32 random bits from the runtime's per-thread wyrand
// state: a couple of nanoseconds, against about 10 for math/rand/v2's
// ChaCha8 (measured in CPU time on the development machine), which on
// the library path was alone 4% of a memory-store check. Not for
// anything that must be unpredictable: it only picks which allowed
// checks are observed. The runtime keeps this name and signature for
// packages that link to it (go.dev/issue/67401).
//
//go:linkname cheaprand runtime.cheaprand
func cheaprand() uint32

// procPin returns the number of the runtime's processor (P) the calling
// goroutine runs on, from 0 to GOMAXPROCS-1, and keeps the goroutine on
// it until procUnpin, called right after: the goroutine may move then,
// so the number only picks a tracker's shard, which a lock guards. The
// runtime keeps these names and signatures for packages that link to
// them (go.dev/issue/67401).
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()
