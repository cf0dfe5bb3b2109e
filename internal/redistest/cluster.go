package redistest

import (
	"fmt"
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

// Cluster deadlines.
const (
	clusterTimeout  = 60 * time.Second // create, or heal after a failover
	clusterNodeWait = "2000"           // cluster-node-timeout, ms
	slotCount       = 16384
)

// Cluster is a Redis Cluster of three masters and three replicas started
// for a test. Its methods may be called from several goroutines.
type Cluster struct {
	t     testing.TB
	nodes []*Server

	mu     sync.Mutex
	client rueidis.Client

	hmu  sync.Mutex
	hung map[*Server]bool // stopped by HangMaster: not live
}

// NewCluster starts six cluster-enabled redis-servers, joins them with
// redis-cli --cluster create --cluster-replicas 1, and waits until every
// node reports cluster_state:ok with all 16384 slots served and every
// replica is in sync with its master. The processes stop when the test ends.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	return NewClusterArgs(t)
}

// NewClusterArgs is NewCluster with more redis-server arguments for every
// node, such as "--cluster-require-full-coverage", "no".
func NewClusterArgs(t testing.TB, args ...string) *Cluster {
	t.Helper()
	bin := Binary(t, "redis-server")
	cli := Binary(t, "redis-cli")
	c := &Cluster{t: t}
	t.Cleanup(c.closeClient)
	for range 6 {
		dir := t.TempDir()
		n := newServer(t, bin, dir, func(port, bus int) []string {
			return append(append(serverArgs(dir, port),
				"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", clusterNodeWait,
				"--cluster-replica-validity-factor", "0"), args...)
		})
		n.start(false)
		c.nodes = append(c.nodes, n)
	}
	create := append([]string{"--cluster", "create"}, c.Addrs()...)
	create = append(create, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.Command(cli, create...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy()
	return c
}

// Nodes returns the six nodes, in the order they were started. Which are
// masters changes after a failover: see Masters.
func (c *Cluster) Nodes() []*Server { return c.nodes }

// Addrs returns the addresses of the six nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URL returns "redis-cluster://<addr>,<addr>,..." with every node as a
// seed: the form redisstore.Dial accepts.
func (c *Cluster) URL() string {
	return "redis-cluster://" + strings.Join(c.Addrs(), ",")
}

// Client returns a rueidis Cluster client, created on first use and closed
// when the test ends, for assertions.
func (c *Cluster) Client() rueidis.Client {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.liveAddrs(), DisableCache: true})
		if err != nil {
			c.t.Fatalf("redistest: cluster client: %v", err)
		}
		c.client = cl
	}
	return c.client
}

func (c *Cluster) closeClient() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		c.client.Close()
		c.client = nil
	}
}

// Do runs one command through the Cluster client for an assertion. args[1],
// when present, must be the command's key (as in GET k or PTTL k): the
// command is routed by it. A transport error fails the test; a Redis error
// reply is returned in the result.
func (c *Cluster) Do(args ...string) rueidis.RedisResult {
	c.t.Helper()
	cl := c.Client()
	if len(args) < 2 {
		return do(c.t, cl, args...)
	}
	return doCmd(c.t, cl, cl.B().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build(), args)
}

func (c *Cluster) liveAddrs() []string {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	var addrs []string
	for _, n := range c.nodes {
		if n.Running() && !c.hung[n] {
			addrs = append(addrs, n.Addr())
		}
	}
	return addrs
}

// node returns the Server listening on addr, or nil.
func (c *Cluster) node(addr string) *Server {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// slotRange is one entry of CLUSTER SLOTS: slots [from, to] and the
// address of their master.
type slotRange struct {
	from, to int64
	master   string
}

func clusterSlots(addr string) ([]slotRange, error) {
	v, err := command(addr, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	entries, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("CLUSTER SLOTS: unexpected reply %v", v)
	}
	var ranges []slotRange
	for _, e := range entries {
		f, ok := e.([]any)
		if !ok || len(f) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: unexpected entry %v", e)
		}
		m, _ := f[2].([]any)
		if len(m) < 2 {
			return nil, fmt.Errorf("CLUSTER SLOTS: unexpected master %v", f[2])
		}
		from, _ := f[0].(int64)
		to, _ := f[1].(int64)
		host, _ := m[0].(string)
		port, _ := m[1].(int64)
		ranges = append(ranges, slotRange{from, to, host + ":" + strconv.FormatInt(port, 10)})
	}
	return ranges, nil
}

// Masters returns the nodes that currently serve slots, as seen by a live
// node.
func (c *Cluster) Masters() []*Server {
	c.t.Helper()
	for _, addr := range c.liveAddrs() {
		ranges, err := clusterSlots(addr)
		if err != nil {
			continue
		}
		seen := map[string]bool{}
		var masters []*Server
		for _, r := range ranges {
			if n := c.node(r.master); n != nil && !seen[r.master] {
				seen[r.master] = true
				masters = append(masters, n)
			}
		}
		return masters
	}
	c.t.Fatalf("redistest: no live cluster node answers CLUSTER SLOTS")
	return nil
}

// MasterOf returns the node serving key's slot.
func (c *Cluster) MasterOf(key string) *Server {
	c.t.Helper()
	slot := int64(Slot(key))
	for _, addr := range c.liveAddrs() {
		ranges, err := clusterSlots(addr)
		if err != nil {
			continue
		}
		for _, r := range ranges {
			if r.from <= slot && slot <= r.to {
				if n := c.node(r.master); n != nil {
					return n
				}
			}
		}
	}
	c.t.Fatalf("redistest: no master found for key %q (slot %d)", key, slot)
	return nil
}

// KillMaster kills (SIGKILL) the master serving key's slot and waits until
// one of its replicas has been promoted and the Cluster is healthy again.
// Before the kill it waits (WAIT 1, up to 5 s) until a replica has
// acknowledged every write so far: replication is asynchronous, and a test
// should see a failover, not writes lost to replication lag. (For a crash
// that may lose writes, Kill the node from MasterOf and call WaitHealthy.)
// It returns the killed node, which Restart brings back as a replica.
func (c *Cluster) KillMaster(key string) *Server {
	c.t.Helper()
	m := c.MasterOf(key)
	if n, err := m.Do("WAIT", "1", "5000").AsInt64(); err != nil || n < 1 {
		c.t.Fatalf("redistest: WAIT on master %s: %d replicas acknowledged (%v)", m.Addr(), n, err)
	}
	m.Kill()
	c.WaitHealthy()
	return m
}

// Hang stops node n (SIGSTOP), as a lost host would be: its connections
// stay open and nothing answers. From then on the Cluster's helpers treat
// it as gone (WaitHealthy waits for a Cluster healthy without it). It
// stays stopped until the test ends, when it is killed.
func (c *Cluster) Hang(n *Server) {
	c.t.Helper()
	c.hmu.Lock()
	if c.hung == nil {
		c.hung = map[*Server]bool{}
	}
	c.hung[n] = true
	c.hmu.Unlock()
	n.signal(syscall.SIGSTOP)
}

// WaitHealthy waits until every live node reports cluster_state:ok, every
// live node's view has all 16384 slots served by live masters, and every
// live replica's link to its master is up.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	waitFor(c.t, clusterTimeout, c.unhealthy)
}

// unhealthy returns why the Cluster is not healthy yet, or "".
func (c *Cluster) unhealthy() string {
	live := c.liveAddrs()
	isLive := map[string]bool{}
	for _, a := range live {
		isLive[a] = true
	}
	for _, addr := range live {
		ci, err := info(addr, "cluster-info")
		if err != nil {
			return fmt.Sprintf("%s: CLUSTER INFO: %v", addr, err)
		}
		if ci["cluster_state"] != "ok" || ci["cluster_slots_ok"] != strconv.Itoa(slotCount) {
			return fmt.Sprintf("%s: cluster_state %s, slots ok %s", addr, ci["cluster_state"], ci["cluster_slots_ok"])
		}
		if why := slotsServedByLive(addr, isLive); why != "" {
			return why
		}
		repl, err := info(addr, "replication")
		if err != nil {
			return fmt.Sprintf("%s: INFO replication: %v", addr, err)
		}
		if repl["role"] == "slave" && repl["master_link_status"] != "up" {
			return fmt.Sprintf("%s: replica link %s", addr, repl["master_link_status"])
		}
	}
	return ""
}

func slotsServedByLive(addr string, isLive map[string]bool) string {
	ranges, err := clusterSlots(addr)
	if err != nil {
		return fmt.Sprintf("%s: CLUSTER SLOTS: %v", addr, err)
	}
	var covered int64
	for _, r := range ranges {
		if !isLive[r.master] {
			return fmt.Sprintf("%s: slots %d-%d still on dead %s", addr, r.from, r.to, r.master)
		}
		covered += r.to - r.from + 1
	}
	if covered != slotCount {
		return fmt.Sprintf("%s: %d slots covered", addr, covered)
	}
	return ""
}

// SlotMasters returns the address of the master serving each of the 16384
// hash slots, as a live node sees them: one read for many keys, where
// MasterOf reads the map for each.
func (c *Cluster) SlotMasters() []string {
	c.t.Helper()
	for _, addr := range c.liveAddrs() {
		ranges, err := clusterSlots(addr)
		if err != nil {
			continue
		}
		owners := make([]string, slotCount)
		for _, r := range ranges {
			for sl := r.from; sl <= r.to && sl < slotCount; sl++ {
				owners[sl] = r.master
			}
		}
		return owners
	}
	c.t.Fatalf("redistest: no live cluster node answers CLUSTER SLOTS")
	return nil
}
