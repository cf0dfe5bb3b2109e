package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/loadgen"
)

func TestFormatting(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", 100000: "100,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
	for us, want := range map[float64]string{0.4: "0.4µs", 999.94: "999.9µs", 1390: "1.39ms", 2.5e6: "2.50s"} {
		if got := micros(us); got != want {
			t.Errorf("micros(%v) = %q, want %q", us, got, want)
		}
	}
	var b bytes.Buffer
	printProgress(&b, loadgen.Progress{Elapsed: 2500 * time.Millisecond, Ops: 1_000_000, Errors: 3})
	if got, want := b.String(), "\r\033[K   2.5s  1,000,000 decisions  400,000/s  3 errors"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
}
