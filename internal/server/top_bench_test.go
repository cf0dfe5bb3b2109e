package server

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkCheckTop measures POST /v1/check through the API handler with
// top-keys tracking on (the defaults: sample 8) and off (top.enabled:
// false), side by side: 1,000 keys, one in ten in a zone of 1 per minute,
// so denied after its first check.
//
//	go test -run '^$' -bench BenchmarkCheckTop -count 8 ./internal/server
func BenchmarkCheckTop(b *testing.B) {
	const zones = "zones: [{name: z, limits: 1000000000r/s}, {name: d, limits: 1r/m}]\n"
	bodies := make([]string, 1000)
	for i := range bodies {
		zone := "z"
		if i%10 == 9 {
			zone = "d"
		}
		bodies[i] = `{"zone":"` + zone + `","key":"bench-` + strconv.Itoa(i) + `"}`
	}
	for _, bb := range []struct{ name, yaml string }{
		{"off", zones + "top: {enabled: false}\n"},
		{"on", zones},
	} {
		b.Run(bb.name, func(b *testing.B) {
			cfg, err := parseConfigBytes(bb.yaml)
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
			h := limitBody(s.apiHandler("api"), cfg.Listeners[0].MaxBodyBytes)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					w := httptest.NewRecorder()
					req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(bodies[i%len(bodies)]))
					req.Header.Set("Content-Type", "application/json")
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK && w.Code != http.StatusTooManyRequests {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}
