//go:build !memstore_hooks

package memstore

import (
	"testing"

	"github.com/sluicehq/sluice"
)

// interleaved needs the hook that builds tagged memstore_hooks compile
// into peek's copy (see midcopy.go); scripts/test runs the package's
// tests with that tag.
func interleaved(t *testing.T, _ sluice.Algorithm) {
	t.Skip("forcing a writer into a reader's copy needs -tags memstore_hooks (scripts/test sets it)")
}
