package server

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// threadCPU returns the CPU time the calling OS thread has used
// (CLOCK_THREAD_CPUTIME_ID), which leaves out the time other processes of
// a shared machine take.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// BenchmarkCheckTopRatio measures what top-keys tracking costs POST
// /v1/check through the API handler (no network), as BenchmarkCheckTop
// does, but as a ratio a busy machine disturbs little: 21 rounds of 20,000
// requests per goroutine (GOMAXPROCS goroutines locked to their threads)
// on a server with tracking off and one with it on (the defaults), in
// alternating order; it reports the median, 10th and 90th percentile of
// the ratio of requests per CPU-second on to off, and the CPU µs per
// request of each. Run it once:
//
//	go test -run '^$' -bench BenchmarkCheckTopRatio -benchtime 1x ./internal/server
func BenchmarkCheckTopRatio(b *testing.B) {
	const zones = "zones: [{name: z, limits: 1000000000r/s}, {name: d, limits: 1r/m}]\n"
	bodies := make([]string, 1000)
	for i := range bodies {
		zone := "z"
		if i%10 == 9 {
			zone = "d"
		}
		bodies[i] = `{"zone":"` + zone + `","key":"bench-` + strconv.Itoa(i) + `"}`
	}
	handler := func(yaml string) http.Handler {
		cfg, err := parseConfigBytes(yaml)
		if err != nil {
			b.Fatal(err)
		}
		s, err := New(b.Context(), cfg, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if s.top != nil {
			go s.top.Run(b.Context())
		}
		return limitBody(s.apiHandler("api"), cfg.Listeners[0].MaxBodyBytes)
	}
	off, on := handler(zones+"top: {enabled: false}\n"), handler(zones)
	const perRound = 20_000
	run := func(h http.Handler) time.Duration {
		var mu sync.Mutex
		var cpu time.Duration
		var wg sync.WaitGroup
		for w := range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				start := threadCPU()
				for i := w * 7919; i < w*7919+perRound; i++ {
					rec := httptest.NewRecorder()
					req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(bodies[i%len(bodies)]))
					req.Header.Set("Content-Type", "application/json")
					h.ServeHTTP(rec, req)
				}
				used := threadCPU() - start
				mu.Lock()
				cpu += used
				mu.Unlock()
			})
		}
		wg.Wait()
		return cpu
	}
	run(off)
	run(on)
	var ratios, usOff, usOn []float64
	for b.Loop() {
		for r := range 21 {
			var cOff, cOn time.Duration
			if r%2 == 0 {
				cOff, cOn = run(off), run(on)
			} else {
				cOn, cOff = run(on), run(off)
			}
			ratios = append(ratios, float64(cOff)/float64(cOn))
			n := float64(perRound * runtime.GOMAXPROCS(0))
			usOff, usOn = append(usOff, cOff.Seconds()*1e6/n), append(usOn, cOn.Seconds()*1e6/n)
		}
	}
	for _, s := range [][]float64{ratios, usOff, usOn} {
		slices.Sort(s)
	}
	b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
	b.ReportMetric(ratios[len(ratios)/10], "p10-ratio")
	b.ReportMetric(ratios[len(ratios)*9/10], "p90-ratio")
	b.ReportMetric(usOff[len(usOff)/2], "cpu-µs/req-off")
	b.ReportMetric(usOn[len(usOn)/2], "cpu-µs/req-on")
}
