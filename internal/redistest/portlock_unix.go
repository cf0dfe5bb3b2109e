//go:build unix

package redistest

import (
	"errors"
	"os"
	"syscall"
)

// lockPort takes port's lock without waiting. It returns the open lock
// file, which holds the lock until closed, or nil when another process
// holds it.
func lockPort(port int) (*os.File, error) {
	f, err := portLockFile(port)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	return f, nil
}

// isOwner reports whether the current user owns the file of fi.
func isOwner(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
