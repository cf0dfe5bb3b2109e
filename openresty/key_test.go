package openresty

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// keySources are the key sources of the key tests: the Lua table given to
// sluice.key, and the httplimit KeyFunc sluice serve builds for the same
// config (internal/server's keyFunc).
var keySources = []struct {
	path string
	lua  string
	fn   func(trusted []netip.Prefix) httplimit.KeyFunc
}{
	{"query", `from = "query:token"`, func([]netip.Prefix) httplimit.KeyFunc { return httplimit.Query("token") }},
	{"header", `from = "header:X-API-Key"`, func([]netip.Prefix) httplimit.KeyFunc { return httplimit.Header("X-API-Key") }},
	{"cookie", `from = "cookie:session"`, func([]netip.Prefix) httplimit.KeyFunc { return httplimit.Cookie("session") }},
	{"addr", `from = "client-address"`, func([]netip.Prefix) httplimit.KeyFunc { return httplimit.ClientAddr(nil) }},
	{"trusted", `from = "client-address", trusted_proxies = {"127.0.0.0/8", " 10.0.0.0/8", "::ffff:192.0.2.0/120", "2001:db8::7"}`,
		func(tr []netip.Prefix) httplimit.KeyFunc { return httplimit.ClientAddr(tr) }},
	{"combine", `from = {"header:X-API-Key", "query:token"}`, func([]netip.Prefix) httplimit.KeyFunc {
		return httplimit.Combine(httplimit.Header("X-API-Key"), httplimit.Query("token"))
	}},
	{"first", `first_of = {"header:X-API-Key", "cookie:session", "client-address"}, trusted_proxies = {"127.0.0.1"}`,
		func(tr []netip.Prefix) httplimit.KeyFunc {
			return httplimit.FirstOf(httplimit.Header("X-API-Key"), httplimit.Cookie("session"), httplimit.ClientAddr(tr))
		}},
}

// keyConf adds /key/<source>: the key sluice.key reads from the request,
// in base64, or "none" and a 404.
func keyConf() string {
	var b strings.Builder
	for _, s := range keySources {
		fmt.Fprintf(&b, `
        location = /key/%s {
            content_by_lua_block {
                local k, why = require("sluice").key{ %s }
                if not k then ngx.status = 404; return ngx.say("none: ", why) end
                ngx.say(ngx.encode_base64(k))
            }
        }
`, s.path, s.lua)
	}
	return b.String()
}

// goKeyServer serves /key/<source> as keyConf does, with httplimit.
func goKeyServer(t *testing.T) string {
	t.Helper()
	trusted, err := httplimit.ParseTrustedProxies([]string{"127.0.0.0/8", " 10.0.0.0/8", "::ffff:192.0.2.0/120", "2001:db8::7"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := httplimit.ParseTrustedProxies([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, s := range keySources {
		tr := trusted
		if s.path == "first" {
			tr = first
		}
		fn := s.fn(tr)
		mux.HandleFunc("/key/"+s.path, func(w http.ResponseWriter, r *http.Request) {
			k, err := fn(r)
			if err != nil {
				if !errors.Is(err, httplimit.ErrNoKey) {
					t.Errorf("%s: %v, want ErrNoKey", s.path, err)
				}
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprintln(w, "none")
				return
			}
			fmt.Fprintln(w, base64.StdEncoding.EncodeToString([]byte(k)))
		})
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// rawKey sends a request of target and header lines to addr over a new
// connection, byte for byte, and returns the key answered ("" for none).
func rawKey(t *testing.T, addr, target, headers string) (string, bool) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: test\r\n"+headers+"Connection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %q: %v", addr, target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(body)))
		if err != nil {
			t.Fatalf("%s %q: body %q", addr, target, body)
		}
		return string(k), true
	case http.StatusNotFound:
		return "", false
	}
	t.Fatalf("%s %q %q: %s %q", addr, target, headers, resp.Status, body)
	return "", false
}

// keyRequests are requests whose keys the module and httplimit must read
// alike: spellings of one token, repeated and empty arguments, bad
// escapes, header and cookie forms, forwarded addresses from trusted and
// untrusted peers.
var keyRequests = []struct{ query, headers string }{
	{"token=enc16346", ""},
	{"token=%65%6e%63%31%36%33%34%36", ""},
	{"token=%65nc16346", ""},
	{"token=%65%6E%63%31%36%33%34%36", ""},
	{"%74oken=enc16346", ""},
	{"t%6fken=enc16346&token=other", ""},
	{"token=x&token=enc16346", ""},
	{"token=enc16346&token=x", ""},
	{"a=1&&token=enc16346", ""},
	{"token=&token=a", ""},
	{"token", ""},
	{"token=a+b%2Bc", ""},
	{"tok+en=x&token=y", ""},
	{"token=%zz&token=y", ""},
	{"token=%e", ""},
	{"token=a=b;token=c", ""},
	{"TOKEN=a", ""},
	{"token=%00%7B%7D%3A%25%7C%5C", ""},
	{"token=%C3%A9%FF", ""},
	{"", "X-API-Key: abc\r\n"},
	{"", "x-api-key:   spaced \t\r\n"},
	{"", "X-API-Key: first\r\nX-API-Key: second\r\n"},
	{"", "X-API-Key: \xc2\xa0nbsp\xe3\x80\x80\r\n"},
	{"", "X-API-Key: \r\nX-API-Key: later\r\n"},
	{"token=a%7Cb", "X-API-Key: k|e\\y\r\n"},
	{"", "Cookie: session=abc\r\n"},
	{"", "Cookie: a=1; session=\"quoted\"; session=later\r\n"},
	{"", "Cookie: session=bad\\value; session=good\r\n"},
	{"", "Cookie: a=1\r\nCookie: session=second-line\r\n"},
	{"", "Cookie: session=; session=b\r\n"},
	{"", "Cookie:  session = sp ace \r\n"},
	{"", "X-Forwarded-For: 203.0.113.9\r\n"},
	{"", "X-Forwarded-For: 198.51.100.1, 10.1.2.3\r\n"},
	{"", "X-Forwarded-For: 198.51.100.1\r\nX-Forwarded-For: 10.1.2.3, 10.0.0.2\r\n"},
	{"", "X-Forwarded-For: garbage, 203.0.113.9\r\n"},
	{"", "X-Forwarded-For: 203.0.113.9, garbage\r\n"},
	{"", "X-Forwarded-For: 10.0.0.1, 10.0.0.2\r\n"},
	{"", "X-Forwarded-For: [2001:DB8:0:0:0:0:0:1]:443\r\n"},
	{"", "X-Forwarded-For: 2001:db8:0:0:1:0:0:1, 2001:db8::7\r\n"},
	{"", "X-Forwarded-For: ::ffff:203.0.113.5, ::ffff:192.0.2.9\r\n"},
	{"", "X-Forwarded-For: fe80::1%eth0\r\n"},
	{"", "X-Forwarded-For: 203.0.113.9:8080\r\n"},
	{"", "X-Forwarded-For: 01.2.3.4\r\n"},
	{"", "X-Forwarded-For: 1.2.3.256\r\n"},
	{"", "X-Forwarded-For: [1.2.3.4]:80\r\n"},
	{"", "X-Forwarded-For: ::1:2:3:4:5:6:7:8\r\n"},
	{"", "X-Forwarded-For: 1:0:0:2:0:0:0:3\r\n"},
	{"", "X-Forwarded-For: 1::2:3:4:5:6:7:8\r\n"},
	{"", "X-Real-IP: 198.51.100.2\r\n"},
	{"", "X-Real-IP: 198.51.100.2\r\nX-Forwarded-For: 203.0.113.9, 198.51.100.2\r\n"},
	{"", "X-Real-IP: 198.51.100.2\r\nX-Forwarded-For: 198.51.100.2, 203.0.113.9\r\n"},
	{"", "X-Real-IP: not-an-ip\r\n"},
	{"", "X-Real-IP:  \r\nX-Forwarded-For: 203.0.113.9\r\n"},
}

// TestKeyAsGo: for every key source and request, sluice.key in nginx
// reads the key httplimit reads in Go (sluice serve's key sources), byte
// for byte, or neither finds one.
func TestKeyAsGo(t *testing.T) {
	n := startNginx(t, 1, harnessConf(t, keyConf()))
	ngxAddr := strings.TrimPrefix(n.url, "http://")
	goAddr := goKeyServer(t)
	for _, s := range keySources {
		for _, r := range keyRequests {
			target := "/key/" + s.path
			if r.query != "" {
				target += "?" + r.query
			}
			want, wantOK := rawKey(t, goAddr, target, r.headers)
			got, gotOK := rawKey(t, ngxAddr, target, r.headers)
			if got != want || gotOK != wantOK {
				t.Errorf("%s ?%s %q: nginx %q (%v), Go %q (%v)", s.path, r.query, r.headers, got, gotOK, want, wantOK)
			}
		}
	}
}

// TestQueryKeyAsGoRandom: 400 queries of one to three arguments, drawn
// from a fixed seed out of spellings of the name (encoded, with "+", in
// another case, with a bad escape) and values made of "%" with good and
// bad hex, "+", "=", ";" and encoded "&", key alike in nginx and in Go;
// at least 40 of them carry a key.
func TestQueryKeyAsGoRandom(t *testing.T) {
	n := startNginx(t, 1, harnessConf(t, keyConf()))
	ngxAddr := strings.TrimPrefix(n.url, "http://")
	goAddr := goKeyServer(t)
	r := rand.New(rand.NewPCG(25, 2))
	names := []string{"token", "%74oken", "t%6Fken", "tok%65n", "%74%6f%6b%65%6e", "to+ken", "TOKEN", "%zzoken", "x", ""}
	values := []string{"a", "6", "%", "%4", "%zz", "%41", "%e9", "+", "%2B", "=", ";", "%3D", "%26", "%7C", "token"}
	keyed := 0
	for range 400 {
		var q strings.Builder
		for i := range 1 + r.IntN(3) {
			if i > 0 {
				q.WriteString("&")
			}
			q.WriteString(names[r.IntN(len(names))])
			if r.IntN(8) == 0 {
				continue // no "="
			}
			q.WriteString("=")
			for range r.IntN(4) {
				q.WriteString(values[r.IntN(len(values))])
			}
		}
		target := "/key/query?" + q.String()
		want, wantOK := rawKey(t, goAddr, target, "")
		got, gotOK := rawKey(t, ngxAddr, target, "")
		if got != want || gotOK != wantOK {
			t.Errorf("?%s: nginx %q (%v), Go %q (%v)", q.String(), got, gotOK, want, wantOK)
		}
		if wantOK {
			keyed++
		}
	}
	if keyed < 40 {
		t.Errorf("%d of 400 queries carry a key: the draw does not exercise decoding", keyed)
	}
}

// spellings are requests that carry the token enc16346 by the first-value
// rule: percent-encoded, partly or wholly, in the name or the value, or
// first of two.
var spellings = []string{
	"token=enc16346",
	"token=%65%6e%63%31%36%33%34%36",
	"token=%65nc16346",
	"%74%6F%6B%65%6E=enc16346",
	"token=enc16346&token=x",
	"a=1&token=enc%31%36346&token=enc16346",
}

// TestKeySpellingsShareOneLimit: behind the example's key source
// (from = "query:token"), every spelling of one token spends one limit in
// nginx, and a Go process keying the same zone with httplimit.Query on the
// same Redis spends that very limit: 10 admitted in all, then every
// spelling denied on either side, and one state key in Redis.
func TestKeySpellingsShareOneLimit(t *testing.T) {
	srv := redistest.Standalone(t)
	n := startNginx(t, 2, harnessConf(t, fmt.Sprintf(`
        location = /api {
            access_by_lua_block {
                local sluice = require "sluice"
                if not pcall(sluice.limiter, "api") then
                    sluice.define("api", { redis = %q, timeout = 2000 })
                end
                sluice.limiter("api"):access{ zone = "api", from = "query:token", limits = "10r/h" }
            }
            content_by_lua_block { ngx.say("app") }
        }
        location = /reused {
            access_by_lua_block {
                -- One options table for every request of the worker.
                local sluice = require "sluice"
                package.loaded.reused_opts = package.loaded.reused_opts or
                    { zone = "reused", from = "query:token", limits = "1r/h" }
                sluice.limiter("api"):access(package.loaded.reused_opts)
            }
            content_by_lua_block { ngx.say("app") }
        }
`, srv.URL())))
	store, err := redisstore.Dial(srv.URL(), redisstore.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	limits, err := sluice.ParseLimits("10r/h")
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(store, limits, httplimit.Options{Key: httplimit.Query("token"), Zone: "api"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goSrv := &http.Server{Handler: mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "app\n")
	})), ReadHeaderTimeout: 10 * time.Second}
	go goSrv.Serve(l)
	defer goSrv.Close()
	fronts := []string{n.url + "/api", "http://" + l.Addr().String() + "/api"}
	admitted := 0
	for i := range 3 * len(spellings) {
		url := fronts[i%2] + "?" + spellings[i%len(spellings)]
		resp, body := get(t, url)
		switch resp.StatusCode {
		case http.StatusOK:
			admitted++
			if admitted > 10 {
				t.Fatalf("request %d (%s): admitted %d, over the limit of 10", i+1, url, admitted)
			}
		case http.StatusTooManyRequests:
			if admitted < 10 {
				t.Fatalf("request %d (%s) denied after %d admitted, want 10 first", i+1, url, admitted)
			}
		default:
			t.Fatalf("request %d (%s): %s %q", i+1, url, resp.Status, body)
		}
	}
	if admitted != 10 {
		t.Fatalf("admitted %d, want 10", admitted)
	}
	keys, err := srv.Do("KEYS", "sluice:api*").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Fatalf("Redis keys of the zone: %q, want one", keys)
	}
	// access does not write the key into its options: a table reused
	// across requests keys each by its own token.
	for _, r := range []struct {
		tok  string
		want int
	}{{"a", 200}, {"b", 200}, {"c", 200}, {"a", 429}} {
		if resp, body := get(t, n.url+"/reused?token="+r.tok); resp.StatusCode != r.want {
			t.Fatalf("reused options, token %s: %s %q, want %d", r.tok, resp.Status, body, r.want)
		}
	}
}
