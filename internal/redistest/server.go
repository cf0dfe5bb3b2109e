package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Deadlines of the waits.
const (
	startTimeout = 15 * time.Second // a process answering PING
	stopTimeout  = 10 * time.Second // a process gone after SIGTERM or SIGKILL
	startRetries = 5                // new ports tried when one is taken
	retryTimeout = 10 * time.Second // an assertion command failing on transport
)

// Server is one redis-server (or redis-sentinel) process started for a
// test. Its methods may be called from several goroutines.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	args func(port, bus int) []string // the command line for the ports

	mu     sync.Mutex
	port   int
	bus    int        // cluster bus port, 0 outside a Cluster
	locks  []*os.File // the ports' locks, held until cleanup (see portLockDir)
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	client rueidis.Client
}

// Standalone starts a redis-server on a free loopback port and stops it
// when the test ends. extra are more configuration arguments, such as
// "--requirepass", "secret".
func Standalone(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin := Binary(t, "redis-server")
	dir := t.TempDir()
	s := newServer(t, bin, dir, func(port, _ int) []string {
		return append(serverArgs(dir, port), extra...)
	})
	s.start(false)
	return s
}

func serverArgs(dir string, port int) []string {
	return []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"),
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--protected-mode", "no", "--loglevel", "notice",
	}
}

func newServer(t testing.TB, bin, dir string, args func(port, bus int) []string) *Server {
	s := &Server{t: t, bin: bin, dir: dir, args: args}
	t.Cleanup(s.cleanup)
	return s
}

// Addr returns the server's address, "127.0.0.1:<port>".
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port returns the server's TCP port.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// URL returns "redis://127.0.0.1:<port>".
func (s *Server) URL() string { return "redis://" + s.Addr() }

// PID returns the process id of the running process, or 0 when it is not
// running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		return 0
	}
	return s.cmd.Process.Pid
}

// Dir returns the server's working directory (its log is redis.log there).
func (s *Server) Dir() string { return s.dir }

// Running reports whether the process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running()
}

func (s *Server) running() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// start launches the process and waits until it answers PING. With
// samePort it keeps the current ports (a restart); otherwise it picks free
// ones and tries new ones while the address is taken.
func (s *Server) start(samePort bool) {
	s.t.Helper()
	var last error
	for range startRetries {
		if !samePort {
			s.pickPorts()
		}
		if last = s.launch(); last == nil {
			return
		}
		if samePort || !strings.Contains(last.Error(), "in use") {
			break
		}
	}
	s.t.Fatalf("redistest: start %s: %v", filepath.Base(s.bin), last)
}

// pickPorts picks and locks two free ports, releasing those it had.
func (s *Server) pickPorts() {
	s.t.Helper()
	ports, locks, err := freePorts(2)
	if err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
	s.mu.Lock()
	old := s.locks
	s.port, s.bus, s.locks = ports[0], ports[1], locks
	s.mu.Unlock()
	releasePorts(old)
}

// launch starts one process and waits for PING; on failure the process is
// gone and the error quotes the end of its log.
func (s *Server) launch() error {
	s.mu.Lock()
	cmd := exec.Command(s.bin, s.args(s.port, s.bus)...)
	cmd.Dir = s.dir
	out, err := os.OpenFile(filepath.Join(s.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	orphanProof(cmd)
	if err := cmd.Start(); err != nil {
		out.Close()
		s.mu.Unlock()
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	pass := password(cmd.Args)
	s.mu.Unlock()

	if err := waitServing(addr, pass, cmd.Process.Pid, exited, startTimeout); err != nil {
		s.signal(syscall.SIGKILL)
		return fmt.Errorf("%w\n%s", err, s.logTail())
	}
	return nil
}

// password returns the value of --requirepass on a command line, or "".
func password(args []string) string {
	for i, a := range args {
		if a == "--requirepass" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// waitServing waits up to timeout until the process pid serves on addr: it answers PING
// (not LOADING), and INFO's process_id is pid. Whatever else answers on
// the port (a server of another test process that took it) is not
// accepted.
func waitServing(addr, pass string, pid int, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	want := "process_id:" + strconv.Itoa(pid)
	for {
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start (address in use?)", addr)
		default:
		}
		cmds := [][]string{{"PING"}, {"INFO", "server"}}
		if pass != "" {
			cmds = append([][]string{{"AUTH", pass}}, cmds...)
		}
		replies, err := pipeline(addr, cmds...)
		var why any = err
		if err == nil {
			ping, text := replies[len(replies)-2], replies[len(replies)-1]
			why = ping
			if e, ok := ping.(respError); !ok || !strings.HasPrefix(string(e), "LOADING") {
				why = text
				if text, ok := text.(string); ok {
					if hasLine(text, want) {
						return nil
					}
					why = fmt.Sprintf("another process answers: %s", firstLine(text, "process_id:"))
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve as process %d within %v: %v", addr, pid, timeout, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hasLine reports whether text (an INFO reply) has the line line.
func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// firstLine returns the first line of text starting with prefix, or "".
func firstLine(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// logTail returns the last lines of the server's logs, for error messages.
func (s *Server) logTail() string {
	var b strings.Builder
	for _, name := range []string{"redis.log", "stdout.log"} {
		data, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "--- %s (last lines)\n%s\n", name, strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	// "Address already in use" is what start retries on.
	return strings.ReplaceAll(b.String(), "Address already in use", "address in use")
}

// Kill stops the process with SIGKILL, as a crash would, and waits until it
// is gone. Its ports stay reserved for Restart: their locks (see
// portLockDir) are held until the test ends, so no other test process's
// helpers hand them out.
func (s *Server) Kill() {
	s.t.Helper()
	s.stop(syscall.SIGKILL)
}

// Stop stops the process with SIGTERM (a clean shutdown) and waits until it
// is gone; past the deadline it is killed and the test fails.
func (s *Server) Stop() {
	s.t.Helper()
	s.stop(syscall.SIGTERM)
}

func (s *Server) stop(sig syscall.Signal) {
	s.t.Helper()
	if err := s.signalAndWait(sig); err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
}

func (s *Server) signal(sig syscall.Signal) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		return s.exited
	}
	s.cmd.Process.Signal(sig)
	return s.exited
}

func (s *Server) signalAndWait(sig syscall.Signal) error {
	exited := s.signal(sig)
	if exited == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	case <-time.After(stopTimeout):
		<-s.signal(syscall.SIGKILL)
		return fmt.Errorf("%s did not exit within %v of %v; killed", s.Addr(), stopTimeout, sig)
	}
}

// Restart starts the process again on the same port and with the same
// directory (a Cluster node keeps its nodes.conf, so it rejoins), after
// stopping it if it runs; it returns when the server answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start(true)
}

func (s *Server) cleanup() {
	s.mu.Lock()
	c := s.client
	s.client = nil
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
	if err := s.signalAndWait(syscall.SIGKILL); err != nil {
		s.t.Errorf("redistest: cleanup: %v", err)
	}
	s.mu.Lock()
	locks := s.locks
	s.locks = nil
	s.mu.Unlock()
	releasePorts(locks)
}

// Client returns a rueidis client connected to this server, created on
// first use and closed when the test ends. It is meant for assertions
// (reading keys, TTLs, INFO), not for the code under test.
func (s *Server) Client() rueidis.Client {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true,
		})
		if err != nil {
			s.t.Fatalf("redistest: client for %s: %v", addr, err)
		}
		s.client = c
	}
	return s.client
}

// Do runs one command on the server for an assertion and returns its
// result. A Redis error reply is returned in the result; transport errors
// are retried for a few seconds (the client may still hold a connection to
// a killed process), then fail the test.
func (s *Server) Do(args ...string) rueidis.RedisResult {
	s.t.Helper()
	return do(s.t, s.Client(), args...)
}

func do(t testing.TB, c rueidis.Client, args ...string) rueidis.RedisResult {
	t.Helper()
	return doCmd(t, c, c.B().Arbitrary(args...).Build(), args)
}

func doCmd(t testing.TB, c rueidis.Client, cmd rueidis.Completed, args []string) rueidis.RedisResult {
	t.Helper()
	// A client whose server was killed or failed over learns it on its
	// next command: transport errors are retried until the deadline.
	deadline := time.Now().Add(retryTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		res := c.Do(ctx, cmd)
		cancel()
		err := res.Error()
		var redisErr *rueidis.RedisError
		if err == nil || errors.As(err, &redisErr) {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: %v", strings.Join(args, " "), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
