package redistest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStandaloneKillRestart(t *testing.T) {
	s := Standalone(t)
	if got, err := s.Do("SET", "k", "v").ToString(); err != nil || got != "OK" {
		t.Fatalf("SET = %q, %v", got, err)
	}
	port := s.Port()
	if got, err := s.Do("INFO", "server").ToString(); err != nil || !strings.Contains(got, fmt.Sprintf("process_id:%d\r", s.PID())) {
		t.Fatalf("PID %d is not the server's: %v", s.PID(), err)
	}
	s.Kill()
	if s.Running() {
		t.Fatal("Running after Kill")
	}
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Fatal("port still accepts connections after Kill")
	}
	s.Restart()
	if s.Port() != port {
		t.Fatalf("Restart moved the port from %d to %d", port, s.Port())
	}
	// Nothing is persisted: the restarted server is empty.
	if n, err := s.Do("DBSIZE").AsInt64(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after restart = %d, %v; want 0", n, err)
	}
	s.Stop()
	if s.Running() {
		t.Fatal("Running after Stop")
	}
}

func TestStandaloneExtraArgs(t *testing.T) {
	s := Standalone(t, "--requirepass", "secret")
	reply, err := commandString(s.Addr(), "GET", "k")
	if err == nil || reply != "" {
		t.Fatalf("GET without AUTH = %q, %v; want NOAUTH error", reply, err)
	}
}

func TestSlotMatchesRedis(t *testing.T) {
	s := Standalone(t, "--cluster-enabled", "yes")
	for _, key := range []string{"", "a", "foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "héllo\x00\xff"} {
		want, err := s.Do("CLUSTER", "KEYSLOT", key).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if got := Slot(key); int64(got) != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six servers and waits for a failover")
	}
	c := NewCluster(t)
	if got := len(c.Masters()); got != 3 {
		t.Fatalf("%d masters, want 3", got)
	}
	if err := c.Do("SET", "some-key", "v").Error(); err != nil {
		t.Fatal(err)
	}
	killed := c.KillMaster("some-key")
	if m := c.MasterOf("some-key"); m == killed {
		t.Fatal("slot still served by the killed master")
	}
	// The replica had the key: it survives the failover.
	if got, err := c.Do("GET", "some-key").ToString(); err != nil || got != "v" {
		t.Fatalf("GET after failover = %q, %v", got, err)
	}
	killed.Restart()
	c.WaitHealthy()
	if got := len(c.Masters()); got != 3 {
		t.Fatalf("%d masters after the old master rejoined, want 3", got)
	}
}

func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a Sentinel failover")
	}
	s := NewSentinel(t, 3)
	if got := s.CurrentMaster(); got != s.Master {
		t.Fatalf("current master %s, want %s", got.Addr(), s.Master.Addr())
	}
	next := s.Failover()
	if next != s.Replica {
		t.Fatalf("new master %s, want the replica %s", next.Addr(), s.Replica.Addr())
	}
	if got, err := next.Do("SET", "k", "v").ToString(); err != nil || got != "OK" {
		t.Fatalf("SET on the promoted replica = %q, %v", got, err)
	}
}

// TestKilledPortsStayLocked: a killed server's ports, and FreePort's, stay
// locked until the test ends, so that no test process's helpers hand them
// out meanwhile; freePorts never returns a locked port.
func TestKilledPortsStayLocked(t *testing.T) {
	s := Standalone(t)
	s.Kill()
	for _, port := range []int{s.Port(), s.bus} {
		f, err := lockPort(port)
		if err != nil {
			t.Fatal(err)
		}
		if f != nil {
			f.Close()
			t.Fatalf("port %d of a killed server could be locked again", port)
		}
	}
	tls := FreePort(t)
	if f, err := lockPort(tls); err != nil || f != nil {
		f.Close()
		t.Fatalf("FreePort's port %d is not locked (%v)", tls, err)
	}
	ports, locks, err := freePorts(50)
	if err != nil {
		t.Fatal(err)
	}
	defer releasePorts(locks)
	seen := map[int]bool{}
	for _, p := range ports {
		if p == s.Port() || p == s.bus || p == tls || seen[p] {
			t.Fatalf("freePorts returned port %d twice or a locked one (%v)", p, ports)
		}
		seen[p] = true
	}
	s.Restart()
	if got, err := s.Do("PING").ToString(); err != nil || got != "PONG" {
		t.Fatalf("PING after Restart = %q, %v", got, err)
	}
}

// TestWaitServingChecksIdentity: a server that answers on the port but is
// not the process started (another test process's redis-server that took
// the port) is not taken for it.
func TestWaitServingChecksIdentity(t *testing.T) {
	s := Standalone(t, "--requirepass", "secret")
	never := make(chan struct{})
	err := waitServing(s.Addr(), "secret", s.PID()+1, never, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "another process answers: process_id:"+strconv.Itoa(s.PID())) {
		t.Fatalf("waitServing for another pid = %v, want a refusal naming the process that answers", err)
	}
	if err := waitServing(s.Addr(), "secret", s.PID(), never, startTimeout); err != nil {
		t.Fatalf("waitServing for the server's own pid: %v", err)
	}
}
