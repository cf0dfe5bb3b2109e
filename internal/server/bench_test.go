package server

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkCheckHandler measures POST /v1/check through the API handler,
// without the network (decoding, the memory store, encoding, fields,
// metrics), beside a trivial handler that answers 200 to the same
// requests: the difference is what sluice adds to net/http's own cost.
func BenchmarkCheckHandler(b *testing.B) {
	cfg, err := parseConfigBytes("zones: [{name: z, limits: 1000000000r/s}]\n")
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(b.Context(), cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	bodies := make([]string, 1000)
	for i := range bodies {
		bodies[i] = `{"zone":"z","key":"bench-` + strconv.Itoa(i) + `"}`
	}
	trivial := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, bb := range []struct {
		name string
		h    http.Handler
	}{{"trivial", trivial}, {"sluice", limitBody(s.apiHandler("api"), cfg.Listeners[0].MaxBodyBytes)}} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					w := httptest.NewRecorder()
					req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(bodies[i%len(bodies)]))
					req.Header.Set("Content-Type", "application/json")
					bb.h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}

// BenchmarkProxy compares the proxy handler with a plain
// httputil.ReverseProxy to the same real upstream, side by side.
func BenchmarkProxy(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer up.Close()
	cfg, err := parseConfigBytes(`
listeners: [{addr: "127.0.0.1:0"}, {addr: "127.0.0.1:0", serve: proxy}]
zones: [{name: z, limits: 1000000000r/s, key: query:k}]
proxy: {upstream: "` + up.URL + `", rules: [{zones: [z]}]}
`)
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(b.Context(), cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	plain := s.reverseProxy(cfg.Proxy.Upstream)
	for _, bb := range []struct {
		name string
		h    http.Handler
	}{{"plain", plain}, {"sluice", limitBody(s.proxyHandler(), cfg.Listeners[1].MaxBodyBytes)}} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					w := httptest.NewRecorder()
					bb.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/?k=bench-"+strconv.Itoa(i%1000), nil))
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}
