//go:build !linux

package redistest

import "os/exec"

// orphanProof does nothing outside Linux: there, only the test's Cleanup
// stops the processes.
func orphanProof(*exec.Cmd) {}
