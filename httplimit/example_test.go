package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
)

func Example() {
	store, err := memstore.New(memstore.Options{})
	if err != nil {
		panic(err)
	}
	limits, err := sluice.ParseLimits("2r/m")
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.New(store, limits, httplimit.Options{
		// Callers with a token are limited by token, others by address.
		Key: httplimit.FirstOf(httplimit.Header("X-API-Key"), httplimit.ClientAddr(nil)),
	})
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})
	srv := httptest.NewServer(mw.Wrap(hello))
	defer srv.Close()

	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-API-Key", "demo-token")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		res.Body.Close()
		fmt.Println(res.StatusCode, res.Header.Get("RateLimit-Policy"), res.Header.Get("Retry-After") != "")
	}
	// Output:
	// 200 "2r/m";q=2;w=60 false
	// 200 "2r/m";q=2;w=60 false
	// 429 "2r/m";q=2;w=60 true
}

// ClientAddr believes X-Forwarded-For only from the listed proxies, and
// reads it from the right: what a client wrote itself is never used.
func ExampleClientAddr() {
	trusted, err := httplimit.ParseTrustedProxies([]string{"10.0.0.0/8"})
	if err != nil {
		panic(err)
	}
	key := httplimit.ClientAddr(trusted)

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.2:41000"                         // our load balancer
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.9") // 6.6.6.6 was sent by the client
	fmt.Println(key(r))

	r.RemoteAddr = "198.51.100.7:5000" // not a proxy: its header is ignored
	fmt.Println(key(r))
	// Output:
	// 203.0.113.9 <nil>
	// 198.51.100.7 <nil>
}
