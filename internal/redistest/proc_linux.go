package redistest

import (
	"os/exec"
	"syscall"
)

// orphanProof makes the kernel kill the process when the test binary dies,
// so that even a test killed by a timeout leaves no redis-server behind.
func orphanProof(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
