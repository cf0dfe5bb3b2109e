// Package redistest starts real Redis processes for tests: a standalone
// server ([Standalone]), a Cluster of three masters and three replicas
// ([NewCluster]) and a Sentinel setup ([NewSentinel]). Each process listens
// on a free loopback port and keeps its files in a temporary directory of
// the test; all are stopped when the test ends (testing.TB.Cleanup), and
// on Linux each is also killed by the kernel if the test binary dies
// (PR_SET_PDEATHSIG), so no redis-server outlives its test.
//
// # Binaries
//
// redis-server, redis-cli and redis-sentinel are looked up on PATH, then in
// /usr/bin, /usr/sbin and /usr/local/bin (Debian's packages put them in
// /usr/bin; some distributions install sentinel under sbin). When one is
// missing the test is skipped with a message saying which, except when the
// environment variable CI is "true": there a missing binary fails the test,
// so a CI run can never go green without having run the Redis tests.
//
// # Waits
//
// Every wait for a state (a server answering PING, a Cluster reporting
// cluster_state:ok with all 16384 slots served, a replica promoted, a
// Sentinel agreeing on a master) polls the real processes every few
// milliseconds until a deadline; past it the test fails with what was last
// seen. Nothing sleeps for a fixed time hoping a state was reached.
//
// # Ports
//
// A free port is found by listening on 127.0.0.1:0 and taking the port's
// lock: a file named after the port in a directory of the OS temporary
// directory (sluice-redistest-ports), locked with flock by the Server for
// as long as the test runs, while it is killed and waiting for Restart too.
// The helpers of every test process on the machine skip a locked port, so a
// parallel test package cannot start its Redis on the port of a killed
// Cluster master. The files stay (empty, one per port ever used): removing
// one would race with a process opening it. [FreePort] gives a test a
// locked port for another listener (such as --tls-port). Another program
// may still take a port before redis-server binds it, so a server that
// exits at start because its address is in use is started again on a new
// port (up to a few times); and a start or Restart is confirmed only when
// the server answering on the port is the process started (INFO's
// process_id), never whatever else answers there. Cluster nodes get a
// second free port for the cluster bus (cluster-port), rather than the
// default port+10000.
//
// # Timings chosen for tests
//
// Cluster nodes use cluster-node-timeout 2000 ms and Sentinels
// down-after-milliseconds 1000: fast enough for failover tests (a few
// seconds), slow enough that a busy 2-core machine does not trigger
// spurious failovers. Nothing is persisted (save "", appendonly no).
package redistest
