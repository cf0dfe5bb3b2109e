package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sentinelTimeout bounds the waits for Sentinels to agree and to fail over.
const sentinelTimeout = 60 * time.Second

// MasterName is the name under which the Sentinels of NewSentinel monitor
// their master.
const MasterName = "sluice-master"

// Sentinel is a Redis master, one replica and 1 to 3 redis-sentinel
// processes monitoring them, started for a test.
type Sentinel struct {
	t testing.TB
	// Master and Replica are the data servers as started; after a
	// failover their roles are swapped (see CurrentMaster).
	Master, Replica *Server
	// Sentinels are the redis-sentinel processes.
	Sentinels []*Server
}

// NewSentinel starts a master, a replica of it, and n redis-sentinel
// processes (1 <= n <= 3, quorum n/2+1) monitoring the master under
// MasterName, and waits until every Sentinel knows the master, the replica
// and the other Sentinels. Everything stops when the test ends.
func NewSentinel(t testing.TB, n int) *Sentinel {
	t.Helper()
	if n < 1 || n > 3 {
		t.Fatalf("redistest: NewSentinel: %d sentinels, want 1 to 3", n)
	}
	sentinelBin := Binary(t, "redis-sentinel")
	s := &Sentinel{t: t, Master: Standalone(t)}
	s.Replica = Standalone(t, "--replicaof", "127.0.0.1", strconv.Itoa(s.Master.Port()))
	waitFor(t, sentinelTimeout, func() string { return linkDown(s.Replica.Addr()) })
	for range n {
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		sn := newServer(t, sentinelBin, dir, func(port, _ int) []string {
			writeSentinelConf(t, conf, dir, port, s.Master.Port(), n/2+1)
			return []string{conf}
		})
		sn.start(false)
		s.Sentinels = append(s.Sentinels, sn)
	}
	waitFor(t, sentinelTimeout, s.notAgreed)
	return s
}

// writeSentinelConf writes a fresh configuration (a restart keeps the file
// Sentinel rewrote, which already holds what it learnt).
func writeSentinelConf(t testing.TB, conf, dir string, port, masterPort, quorum int) {
	if _, err := os.Stat(conf); err == nil {
		return
	}
	text := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
daemonize no
dir %s
logfile %s
sentinel monitor %s 127.0.0.1 %d %d
sentinel down-after-milliseconds %s 1000
sentinel failover-timeout %s 10000
sentinel parallel-syncs %s 1
`, port, dir, filepath.Join(dir, "redis.log"), MasterName, masterPort, quorum, MasterName, MasterName, MasterName)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatalf("redistest: write %s: %v", conf, err)
	}
}

// Addrs returns the Sentinels' addresses.
func (s *Sentinel) Addrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		addrs[i] = sn.Addr()
	}
	return addrs
}

// URL returns "redis-sentinel://<addr>,<addr>/<MasterName>": the form
// redisstore.Dial accepts.
func (s *Sentinel) URL() string {
	return "redis-sentinel://" + strings.Join(s.Addrs(), ",") + "/" + MasterName
}

// CurrentMaster returns the data server the first live Sentinel names as
// master.
func (s *Sentinel) CurrentMaster() *Server {
	s.t.Helper()
	for _, sn := range s.Sentinels {
		if !sn.Running() {
			continue
		}
		addr, err := masterAddr(sn.Addr())
		if err != nil {
			continue
		}
		for _, d := range []*Server{s.Master, s.Replica} {
			if d.Addr() == addr {
				return d
			}
		}
	}
	s.t.Fatalf("redistest: no sentinel names a known master")
	return nil
}

// Failover kills the current master (SIGKILL) and waits until every live
// Sentinel names the other data server as master and that server has the
// master role. Before the kill it waits (WAIT 1, up to 5 s) until the
// replica has acknowledged every write so far, so that a test sees a
// failover and not writes lost to replication lag. It returns the new
// master.
func (s *Sentinel) Failover() *Server {
	s.t.Helper()
	old := s.CurrentMaster()
	next := s.Master
	if old == s.Master {
		next = s.Replica
	}
	if n, err := old.Do("WAIT", "1", "5000").AsInt64(); err != nil || n < 1 {
		s.t.Fatalf("redistest: WAIT on master %s: %d replicas acknowledged (%v)", old.Addr(), n, err)
	}
	old.Kill()
	waitFor(s.t, sentinelTimeout, func() string {
		for _, sn := range s.Sentinels {
			if !sn.Running() {
				continue
			}
			if addr, err := masterAddr(sn.Addr()); err != nil || addr != next.Addr() {
				return fmt.Sprintf("sentinel %s names %q (%v), want %s", sn.Addr(), addr, err, next.Addr())
			}
		}
		if repl, err := info(next.Addr(), "replication"); err != nil || repl["role"] != "master" {
			return fmt.Sprintf("%s role %q (%v)", next.Addr(), repl["role"], err)
		}
		return ""
	})
	return next
}

func masterAddr(sentinel string) (string, error) {
	v, err := command(sentinel, "SENTINEL", "get-master-addr-by-name", MasterName)
	if err != nil {
		return "", err
	}
	f, ok := v.([]any)
	if !ok || len(f) != 2 {
		return "", fmt.Errorf("get-master-addr-by-name: %v", v)
	}
	host, _ := f[0].(string)
	port, _ := f[1].(string)
	return host + ":" + port, nil
}

// notAgreed returns why the Sentinels do not all know the master, its
// replica and each other yet, or "".
func (s *Sentinel) notAgreed() string {
	for _, sn := range s.Sentinels {
		m, err := sentinelMaster(sn.Addr())
		if err != nil {
			return fmt.Sprintf("sentinel %s: %v", sn.Addr(), err)
		}
		if m["ip"]+":"+m["port"] != s.Master.Addr() || m["num-slaves"] != "1" ||
			m["num-other-sentinels"] != strconv.Itoa(len(s.Sentinels)-1) {
			return fmt.Sprintf("sentinel %s sees master %s:%s, %s replicas, %s other sentinels",
				sn.Addr(), m["ip"], m["port"], m["num-slaves"], m["num-other-sentinels"])
		}
	}
	return ""
}

// sentinelMaster returns SENTINEL MASTER's fields as a map.
func sentinelMaster(addr string) (map[string]string, error) {
	v, err := command(addr, "SENTINEL", "MASTER", MasterName)
	if err != nil {
		return nil, err
	}
	if e, ok := v.(respError); ok {
		return nil, e
	}
	f, _ := v.([]any)
	m := make(map[string]string, len(f)/2)
	for i := 0; i+1 < len(f); i += 2 {
		k, _ := f[i].(string)
		val, _ := f[i+1].(string)
		m[k] = val
	}
	return m, nil
}

func linkDown(replica string) string {
	repl, err := info(replica, "replication")
	if err != nil {
		return err.Error()
	}
	if repl["master_link_status"] != "up" {
		return "replica link " + repl["master_link_status"]
	}
	return ""
}

// waitFor polls cond until it returns "" or the timeout passes; then the
// test fails with cond's last answer.
func waitFor(t testing.TB, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: not ready after %v: %s", timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
