package config

import (
	"time"

	"go.yaml.in/yaml/v4"
)

// Top configures the tracking of the keys each zone limits most (package
// internal/top), served as GET /v1/top, the /ui page and "sluice top".
type Top struct {
	// Disabled turns tracking off: no lists, no per-second counts, and
	// /v1/top and /ui answer 404. YAML: enabled: false. Default: enabled.
	Disabled bool
	// Period is the sliding window of the lists, at least 4s, at most 1h.
	// Default: 1m.
	Period time.Duration
	// Sample is how many allowed checks (not near a limit) one observed
	// check stands for: 1 observes every check. Denials and near-limit
	// checks are always observed. At most 1024. Default: 32.
	Sample int
	// DigestSecretFile names a file whose content (without a final
	// newline, at least 16 bytes of visible ASCII) keys the digests under
	// which keys are listed (HMAC-SHA-256); Load reads it into
	// DigestSecret. Relative names are relative to the configuration
	// file's directory. Servers that must list a key under the same ID
	// configure the same secret. YAML: digest_secret_file. Default: none.
	DigestSecretFile string
	// DigestSecret keys the digests, read from DigestSecretFile by Load or
	// given by Overrides.TopDigestSecret (SLUICE_TOP_DIGEST_SECRET), which
	// wins. Default: none, a random secret drawn at start, so that IDs
	// differ between processes and from one start to the next.
	DigestSecret string
}

// Defaults of the Top section.
const (
	DefaultTopPeriod = time.Minute
	DefaultTopSample = 32
)

func (w *walker) top(n *yaml.Node, path string, t *Top) {
	w.fields(n, path, map[string]func(*yaml.Node, string){
		"enabled":            func(v *yaml.Node, p string) { t.Disabled = !w.boolean(v, p) },
		"period":             func(v *yaml.Node, p string) { t.Period = w.duration(v, p) },
		"sample":             func(v *yaml.Node, p string) { t.Sample = int(min(w.positive(v, p), 1<<20)) },
		"digest_secret_file": func(v *yaml.Node, p string) { t.DigestSecretFile = w.str(v, p) },
	})
}

func (w *walker) validateTop(t *Top) {
	if t.Period == 0 {
		t.Period = DefaultTopPeriod
	}
	if t.Sample == 0 {
		t.Sample = DefaultTopSample
	}
	if t.Period < 4*time.Second || t.Period > time.Hour {
		w.add(w.line("top.period"), "top.period", "%s: want between 4s and 1h", t.Period)
	}
	if t.Sample > 1024 {
		w.add(w.line("top.sample"), "top.sample", "%d: want at most 1024", t.Sample)
	}
}

// readDigestSecret reads t.DigestSecretFile (relative to dir) into
// t.DigestSecret.
func (w *walker) readDigestSecret(t *Top, dir string) {
	const p = "top.digest_secret_file"
	secret, err := readSecret(t.DigestSecretFile, dir)
	if err != nil {
		w.add(w.line(p), p, "%v", err)
		return
	}
	t.DigestSecret = secret
}
