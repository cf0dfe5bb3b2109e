package server

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/benchcpu"
)

// BenchmarkCheckTopRatio measures what top-keys tracking costs POST
// /v1/check through the API handler (no network), as BenchmarkCheckTop
// does, but as a ratio a busy machine disturbs little: 21 rounds of 20,000
// requests per goroutine (GOMAXPROCS goroutines locked to their threads)
// on a server with tracking off and one with it on (the defaults), in
// alternating order; it reports the median, 10th and 90th percentile of
// the ratio of requests per CPU-second on to off, and the CPU ns per
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
	run := func(h http.Handler) func() time.Duration {
		return func() time.Duration {
			return benchcpu.Parallel(func(w int) {
				for i := w * 7919; i < w*7919+perRound; i++ {
					rec := httptest.NewRecorder()
					req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(bodies[i%len(bodies)]))
					req.Header.Set("Content-Type", "application/json")
					h.ServeHTTP(rec, req)
				}
			})
		}
	}
	var r benchcpu.Ratio
	for b.Loop() {
		r = benchcpu.Interleave(21, run(off), run(on))
	}
	r.Report(b, "req", perRound*runtime.GOMAXPROCS(0))
}
