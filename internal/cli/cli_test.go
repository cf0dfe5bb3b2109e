package cli

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

// TestExitCodes: help that was asked for exits 0,
// bad usage (a bare "sluice" included) exits 2, for every command alike.
func TestExitCodes(t *testing.T) {
	type want struct {
		code   int
		stdout string // "" when stdout must be empty
		stderr string
	}
	cases := map[string]want{
		"":                 {2, "", "Usage: sluice <command>"},
		"help":             {0, "Usage: sluice <command>", ""},
		"-h":               {0, "Usage: sluice <command>", ""},
		"--help":           {0, "Usage: sluice <command>", ""},
		"help serve":       {0, "", "Usage: sluice serve"},
		"help nope":        {2, "", `unknown command "nope"`},
		"nope":             {2, "", `unknown command "nope"`},
		"version -x":       {2, "", "flag provided but not defined: -x"},
		"version extra":    {2, "", `unexpected argument "extra"`},
		"check":            {2, "", "give at least one key"},
		"reset":            {2, "", "give at least one key"},
		"bench -c 0":       {2, "", "-c must be >= 1"},
		"simulate -mode x": {2, "", "want shadow or enforce"},
		"serve extra":      {2, "", `unexpected argument "extra"`},
	}
	for _, c := range commands {
		cases[c.name+" -h"] = want{0, "", "Usage: sluice " + c.name}
		cases[c.name+" -help"] = want{0, "", "Usage: sluice " + c.name}
		cases[c.name+" -no-such-flag"] = want{2, "", "flag provided but not defined: -no-such-flag"}
	}
	for line, w := range cases {
		t.Run(line, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(t.Context(), strings.Fields(line), Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(nil)})
			if code != w.code {
				t.Errorf("sluice %s: exit %d, want %d\nstdout: %s\nstderr: %s", line, code, w.code, &stdout, &stderr)
			}
			if w.stdout == "" && stdout.Len() > 0 || !strings.Contains(stdout.String(), w.stdout) {
				t.Errorf("sluice %s: stdout %q, want %q", line, &stdout, w.stdout)
			}
			if !strings.Contains(stderr.String(), w.stderr) {
				t.Errorf("sluice %s: stderr %q, want %q", line, &stderr, w.stderr)
			}
		})
	}
}

// TestServerDefaultPrintedOnce: -server's default is in its description
// only, not repeated by the flag package.
func TestServerDefaultPrintedOnce(t *testing.T) {
	for _, cmd := range []string{"check", "reset"} {
		var stdout, stderr bytes.Buffer
		Main(t.Context(), []string{cmd, "-h"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(nil)})
		if n := strings.Count(stderr.String(), defaultServer); n != 1 {
			t.Errorf("sluice %s -h names %s %d times, want once:\n%s", cmd, defaultServer, n, &stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main(t.Context(), []string{"version"}, Env{Stdout: &stdout, Stderr: &stderr, Getenv: envOf(nil)}); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	if !strings.HasPrefix(stdout.String(), "sluice ") || !strings.Contains(stdout.String(), "go1.") {
		t.Errorf("version %q, want sluice VERSION (goX.Y...)", &stdout)
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-23T14:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionText(bi), "sluice v1.2.3 (go1.26.0, commit 0123456789ab of 2026-11-23T14:00:00Z, modified)"; got != want {
		t.Errorf("versionText = %q, want %q", got, want)
	}
	if got, want := versionText(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}), "sluice devel (go1.26.0)"; got != want {
		t.Errorf("versionText = %q, want %q", got, want)
	}
}
