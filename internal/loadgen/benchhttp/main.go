// Command benchhttp measures the cost of sluice over plain net/http, side
// by side on one machine (scripts/bench-http runs it):
//
//   - POST /v1/check on the memory store against a trivial net/http
//     handler that answers 200;
//   - sluice's reverse proxy (every request checked) against a plain
//     httputil.ReverseProxy, both to the same upstream.
//
// Every server is a separate process started here (the baselines are this
// binary re-run with -role); the load comes from "sluice bench" processes
// with keep-alive connections, one target at a time, alternating which
// side of a pair goes first, for several rounds. It prints a Markdown
// table of medians, ranges and per-round ratios, with the machine and its
// load average, for docs/http.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	role := flag.String("role", "", "internal: run as a baseline server (trivial, proxy or upstream)")
	addr := flag.String("addr", "127.0.0.1:0", "internal: listen address of a -role server")
	upstream := flag.String("upstream", "", "internal: upstream URL of -role proxy")
	var b bench
	flag.StringVar(&b.sluice, "sluice", "", "sluice binary to test (default: build ./cmd/sluice into a temp dir)")
	flag.IntVar(&b.rounds, "rounds", 5, "rounds; each runs every target once")
	flag.DurationVar(&b.duration, "d", 5*time.Second, "duration of each run")
	flag.IntVar(&b.concurrency, "c", 64, "keep-alive connections")
	flag.IntVar(&b.keys, "keys", 1000, "distinct keys the checks are spread over")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *role != "" {
		err = serveRole(ctx, *role, *addr, *upstream)
	} else {
		err = b.run(ctx, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchhttp:", err)
		os.Exit(1)
	}
}

// serveRole runs one baseline server until ctx ends, printing its address
// on stdout once it listens.
func serveRole(ctx context.Context, role, addr, upstream string) error {
	var h http.Handler
	switch role {
	case "trivial", "upstream":
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok\n")
		})
	case "proxy":
		u, err := url.Parse(upstream)
		if err != nil || u.Host == "" {
			return fmt.Errorf("-upstream %q: want a URL such as http://127.0.0.1:9000", upstream)
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		// The same idle-connection limits as sluice's own upstream
		// transport: the default (2 per host) would make the baseline
		// open a connection for most requests.
		rp.Transport = &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}
		// Requests cut short at the end of a run are not worth a log line.
		rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		}
		h = rp
	default:
		return fmt.Errorf("unknown -role %q", role)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
