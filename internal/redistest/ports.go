package redistest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// portLockDir holds one lock file per port that a Server owns, shared by
// every test process of the machine: a port whose file is locked belongs
// to a Server of some process, running or killed and waiting for Restart,
// and no other process's helpers hand it out.
var portLockDir = filepath.Join(os.TempDir(), "sluice-redistest-ports")

// maxPortTries bounds the ports freePorts asks the kernel for before it
// gives up: each one refused is locked by another test process.
const maxPortTries = 200

// FreePort returns a free loopback port, locked (see portLockDir) until
// the test ends, for another listener of a server the test starts, such
// as redis-server's --tls-port: no test process's helpers hand it out
// meanwhile.
func FreePort(t testing.TB) int {
	t.Helper()
	ports, locks, err := freePorts(1)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() { releasePorts(locks) })
	return ports[0]
}

// freePorts returns n distinct loopback ports that were free a moment ago,
// each with its lock (see portLockDir), held until the returned files are
// closed. Every port the kernel offers stays listened on until freePorts
// returns, so that it offers no port twice.
func freePorts(n int) (ports []int, locks []*os.File, err error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
		if err != nil {
			releasePorts(locks)
			ports, locks = nil, nil
		}
	}()
	for range maxPortTries {
		if len(ports) == n {
			return ports, locks, nil
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("find a free port: %w", err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		f, err := lockPort(port)
		if err != nil {
			return nil, nil, fmt.Errorf("lock port %d: %w", port, err)
		}
		if f != nil {
			ports, locks = append(ports, port), append(locks, f)
		}
	}
	if len(ports) == n {
		return ports, locks, nil
	}
	return nil, nil, fmt.Errorf("find a free port: %d ports offered were all locked by other test processes (%s)", maxPortTries, portLockDir)
}

// portLockFile opens the lock file of port, creating it (and the shared
// directory, writable by every user as /tmp is) if need be. The file is
// never removed: removing a lock file races with a process opening it.
func portLockFile(port int) (*os.File, error) {
	if err := os.MkdirAll(portLockDir, 0o777); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(portLockDir); err == nil && fi.Mode().Perm() != 0o777 && isOwner(fi) {
		os.Chmod(portLockDir, 0o777|os.ModeSticky)
	}
	// Read-only: a lock needs no write access, so a file another user
	// created serves as well.
	return os.OpenFile(filepath.Join(portLockDir, strconv.Itoa(port)), os.O_RDONLY|os.O_CREATE, 0o444)
}

func releasePorts(locks []*os.File) {
	for _, f := range locks {
		f.Close() // closing the last descriptor releases the lock
	}
}
