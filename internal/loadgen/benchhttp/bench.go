package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// bench is one benchmark session.
type bench struct {
	sluice      string
	rounds      int
	duration    time.Duration
	concurrency int
	keys        int
	procs       []*exec.Cmd
	sluiceLog   string
}

// logTail returns the end of sluice serve's log.
func (b *bench) logTail() string {
	data, _ := os.ReadFile(b.sluiceLog)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// target is one side of a comparison: the arguments of "sluice bench",
// and the server process whose CPU time the run is charged.
type target struct {
	name string
	args []string
	pid  int
}

// pair compares sluice with its baseline.
type pair struct {
	name           string
	base, sluice   target
	goal           float64
	baseR, sluiceR []result
}

// result is the part of "sluice bench -json" the table uses, and the
// server's CPU time per request.
type result struct {
	PerSecond float64 `json:"decisions_per_s"`
	Checks    uint64  `json:"decisions"`
	Errors    uint64  `json:"errors"`
	// CPUPerOp is the server process's CPU time (user + system) per
	// request, in µs: much less sensitive than throughput to what else
	// runs on the machine.
	CPUPerOp float64 `json:"-"`
	Latency  struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_us"`
}

func (b *bench) run(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "sluice-bench-http-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	defer b.stopAll()
	if b.sluice == "" {
		b.sluice = filepath.Join(dir, "sluice")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", b.sluice, "./cmd/sluice").CombinedOutput(); err != nil {
			return fmt.Errorf("build sluice (run from the repository root): %v\n%s", err, out)
		}
	}
	pairs, err := b.startServers(ctx, dir)
	if err != nil {
		return err
	}
	load0 := loadAverage()
	for round := range b.rounds {
		for i := range pairs {
			p := &pairs[i]
			first, second := &p.base, &p.sluice
			firstR, secondR := &p.baseR, &p.sluiceR
			if round%2 == 1 {
				first, second, firstR, secondR = second, first, secondR, firstR
			}
			for _, side := range []struct {
				t   *target
				out *[]result
			}{{first, firstR}, {second, secondR}} {
				r, err := b.load(ctx, side.t)
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "round %d: %-28s %10.0f/s  p99 %6.0fµs  server CPU %5.1fµs/req\n", round+1, side.t.name, r.PerSecond, r.Latency.P99, r.CPUPerOp)
				*side.out = append(*side.out, r)
			}
		}
	}
	b.report(w, pairs, load0, loadAverage())
	return nil
}

// startServers starts the upstream, the baselines and sluice, and returns
// the comparisons to run against them.
func (b *bench) startServers(ctx context.Context, dir string) ([]pair, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	upstream, _, err := b.startRole(ctx, self, "upstream")
	if err != nil {
		return nil, err
	}
	trivial, trivialPID, err := b.startRole(ctx, self, "trivial")
	if err != nil {
		return nil, err
	}
	plain, plainPID, err := b.startRole(ctx, self, "proxy", "-upstream", "http://"+upstream)
	if err != nil {
		return nil, err
	}
	api, proxy, sluicePID, err := b.startSluice(ctx, dir, upstream)
	if err != nil {
		return nil, err
	}
	keyed := func(addr string) string { return "http://" + addr + "/?k={key}" }
	return []pair{
		{
			name: "decision API vs a trivial handler",
			// The same POST /v1/check requests, answered 200 unread.
			base:   target{"net/http handler (200)", []string{"-server", "http://" + trivial, "-zone", "bench"}, trivialPID},
			sluice: target{"sluice POST /v1/check", []string{"-server", "http://" + api, "-zone", "bench"}, sluicePID},
			goal:   0.6,
		},
		{
			name:   "proxy vs httputil.ReverseProxy",
			base:   target{"httputil.ReverseProxy", []string{"-url", keyed(plain)}, plainPID},
			sluice: target{"sluice proxy", []string{"-url", keyed(proxy)}, sluicePID},
			goal:   0.85,
		},
	}, nil
}

// startRole runs this binary as a baseline server and returns its address
// and process id.
func (b *bench) startRole(ctx context.Context, self, role string, args ...string) (string, int, error) {
	cmd := exec.CommandContext(ctx, self, append([]string{"-role", role}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, err
	}
	if err := cmd.Start(); err != nil {
		return "", 0, err
	}
	b.procs = append(b.procs, cmd)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return "", 0, fmt.Errorf("%s server: %w", role, err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid, nil
}

// sluiceConfig is the server under test: the memory store, one zone whose
// limit no benchmark reaches (so every check is a full, allowed decision),
// keyed by the query argument k, on the API and in front of the upstream.
const sluiceConfig = `store:
  url: memory
log:
  level: warn
listeners:
  - addr: %[1]s
    serve: api
  - addr: %[2]s
    serve: proxy
zones:
  - name: bench
    limits: 1000000000r/s
    key: query:k
proxy:
  upstream: http://%[3]s
  rules:
    - path_prefix: /
      zones: [bench]
`

func (b *bench) startSluice(ctx context.Context, dir, upstream string) (api, proxy string, pid int, err error) {
	if api, err = freeAddr(); err != nil {
		return "", "", 0, err
	}
	if proxy, err = freeAddr(); err != nil {
		return "", "", 0, err
	}
	conf := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, sluiceConfig, api, proxy, upstream), 0o644); err != nil {
		return "", "", 0, err
	}
	logFile, err := os.Create(filepath.Join(dir, "sluice.log"))
	if err != nil {
		return "", "", 0, err
	}
	b.sluiceLog = logFile.Name()
	cmd := exec.CommandContext(ctx, b.sluice, "serve", "-config", conf)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return "", "", 0, err
	}
	b.procs = append(b.procs, cmd)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get("http://" + api + "/healthz")
		if err == nil {
			res.Body.Close()
			if c, err := net.Dial("tcp", proxy); err == nil {
				c.Close()
				return api, proxy, cmd.Process.Pid, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", "", 0, fmt.Errorf("sluice serve not ready on %s and %s after 15s:\n%s", api, proxy, b.logTail())
}

// load runs one "sluice bench" against t.
func (b *bench) load(ctx context.Context, t *target) (result, error) {
	args := append([]string{"bench", "-json", "-c", strconv.Itoa(b.concurrency), "-d", b.duration.String(),
		"-keys", strconv.Itoa(b.keys)}, t.args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, b.sluice, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cpu0, cpuErr := cpuTime(t.pid)
	err := cmd.Run()
	cpu1, cpuErr1 := cpuTime(t.pid)
	var r result
	if jerr := json.Unmarshal(stdout.Bytes(), &r); jerr != nil {
		return r, fmt.Errorf("%s: sluice %s: %v; %v\n%s", t.name, strings.Join(args, " "), err, jerr, stderr.String())
	}
	if cpuErr == nil && cpuErr1 == nil && r.Checks > 0 {
		r.CPUPerOp = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(r.Checks)
	}
	if err != nil || r.Errors > 0 {
		return r, fmt.Errorf("%s: %d errors: %v\n%s\nsluice serve log:\n%s", t.name, r.Errors, err, stderr.String(), b.logTail())
	}
	return r, nil
}

func (b *bench) stopAll() {
	for _, c := range b.procs {
		c.Process.Signal(os.Interrupt)
	}
	for _, c := range b.procs {
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			c.Process.Kill()
			<-done
		}
	}
}

func (b *bench) report(w io.Writer, pairs []pair, load0, load1 string) {
	fmt.Fprintf(w, "Machine: %s, %d CPUs, %s/%s, %s. Load average (1, 5, 15 min) before: %s; after: %s (after includes the benchmark's own processes).\n\n",
		cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), load0, load1)
	fmt.Fprintf(w, "%d rounds of %v per target, %d keep-alive connections, %d keys; medians (min–max).\n\n",
		b.rounds, b.duration, b.concurrency, b.keys)
	fmt.Fprintln(w, "| comparison | baseline req/s | sluice req/s | ratio | goal | baseline p50 / p99 | sluice p50 / p99 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, p := range pairs {
		fmt.Fprintf(w, "| %s | %s | %s | %s | ≥ %.2fx | %s | %s |\n", p.name,
			spread(rates(p.baseR), "%.0f"), spread(rates(p.sluiceR), "%.0f"),
			spread(ratios(p.baseR, p.sluiceR, func(b, s result) float64 { return s.PerSecond / b.PerSecond }), "%.2fx"),
			p.goal, latencies(p.baseR), latencies(p.sluiceR))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Server CPU time (user + system) per request, the same runs: much less sensitive than throughput to what else runs on the machine. The ratio is baseline / sluice, comparable with the goal.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| comparison | baseline µs/req | sluice µs/req | ratio | goal |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, p := range pairs {
		fmt.Fprintf(w, "| %s | %s | %s | %s | ≥ %.2fx |\n", p.name,
			spread(cpus(p.baseR), "%.1f"), spread(cpus(p.sluiceR), "%.1f"),
			spread(ratios(p.baseR, p.sluiceR, func(b, s result) float64 { return b.CPUPerOp / s.CPUPerOp }), "%.2fx"), p.goal)
	}
}

func ratios(base, sluice []result, f func(b, s result) float64) []float64 {
	out := make([]float64, len(base))
	for i := range out {
		out[i] = f(base[i], sluice[i])
	}
	return out
}

func cpus(rs []result) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = r.CPUPerOp
	}
	return out
}

func rates(rs []result) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = r.PerSecond
	}
	return out
}

func latencies(rs []result) string {
	p50, p99 := make([]float64, len(rs)), make([]float64, len(rs))
	for i, r := range rs {
		p50[i], p99[i] = r.Latency.P50, r.Latency.P99
	}
	return fmt.Sprintf("%.0f / %.0f µs", median(p50), median(p99))
}

// spread formats the median and range of xs.
func spread(xs []float64, format string) string {
	return fmt.Sprintf(format+" ("+format+"–"+format+")", median(xs), slices.Min(xs), slices.Max(xs))
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ),
// 100 per second on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// cpuTime returns the user + system CPU time process pid has used, from
// /proc/PID/stat (fields 14 and 15).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces; fields restart after
	// its closing parenthesis, at field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad CPU times", pid)
	}
	return time.Duration(utime+stime) * clockTick, nil
}
