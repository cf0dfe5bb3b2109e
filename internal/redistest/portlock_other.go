//go:build !unix

package redistest

import "os"

// lockPort takes no lock outside Unix (there is no flock): only the
// kernel's choice of a free port keeps test processes apart, and waitServing's
// identity check catches a port taken by another process.
func lockPort(int) (*os.File, error) { return os.Open(os.DevNull) }

func isOwner(os.FileInfo) bool { return false }
