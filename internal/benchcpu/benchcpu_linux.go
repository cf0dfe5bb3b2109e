package benchcpu

import (
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// ThreadCPU returns the CPU time the calling OS thread has used
// (CLOCK_THREAD_CPUTIME_ID): unlike wall time, it leaves out the time
// other processes of a shared machine take. The caller must be locked to
// its thread (runtime.LockOSThread) between two readings.
func ThreadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// Parallel runs work(w) for w in [0, GOMAXPROCS), each on its own
// goroutine locked to its OS thread, and returns the CPU time those
// threads used together.
func Parallel(work func(w int)) time.Duration {
	var mu sync.Mutex
	var cpu time.Duration
	var wg sync.WaitGroup
	for w := range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := ThreadCPU()
			work(w)
			used := ThreadCPU() - start
			mu.Lock()
			cpu += used
			mu.Unlock()
		})
	}
	wg.Wait()
	return cpu
}

// Ratio is the outcome of Interleave.
type Ratio struct {
	// Median, P10 and P90 are the median and the 10th and 90th
	// percentiles, over the rounds, of the ratio of operations per
	// CPU-second of on to those of off (1.0: on costs nothing more; 0.95:
	// 5% fewer operations per second of CPU).
	Median, P10, P90 float64
	// Off and On are the median CPU time of a round of each.
	Off, On time.Duration
}

// Interleave runs off and on (each doing the same work and returning the
// CPU time it used, as Parallel does) once each to warm them, then for
// rounds rounds in alternating order (off then on, then on then off, ...)
// so that a slow spell of the machine weighs on both alike.
func Interleave(rounds int, off, on func() time.Duration) Ratio {
	off()
	on()
	var ratios []float64
	var offs, ons []time.Duration
	for r := range rounds {
		var cOff, cOn time.Duration
		if r%2 == 0 {
			cOff, cOn = off(), on()
		} else {
			cOn, cOff = on(), off()
		}
		ratios = append(ratios, float64(cOff)/float64(cOn))
		offs, ons = append(offs, cOff), append(ons, cOn)
	}
	slices.Sort(ratios)
	slices.Sort(offs)
	slices.Sort(ons)
	n := len(ratios)
	return Ratio{Median: ratios[n/2], P10: ratios[n/10], P90: ratios[n*9/10], Off: offs[n/2], On: ons[n/2]}
}

// Report reports r as metrics of b: the ratios, and the median CPU
// nanoseconds per operation of each variant (ops operations a round)
// under the names "cpu-ns/"+op+"-off" and "-on".
func (r Ratio) Report(b *testing.B, op string, ops int) {
	b.ReportMetric(r.Median, "median-ratio")
	b.ReportMetric(r.P10, "p10-ratio")
	b.ReportMetric(r.P90, "p90-ratio")
	b.ReportMetric(float64(r.Off)/float64(ops), "cpu-ns/"+op+"-off")
	b.ReportMetric(float64(r.On)/float64(ops), "cpu-ns/"+op+"-on")
}
