// Package cli implements the sluice command's subcommands. Each subcommand
// lives in its own file and is listed in commands; nothing here calls
// os.Exit or reads the process environment except through Env.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

// Env is what a subcommand may touch of the process: its standard streams
// and its environment.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

type command struct {
	name    string
	summary string
	// run executes the subcommand with its arguments (after the name) and
	// returns the process exit code.
	run func(ctx context.Context, env Env, args []string) int
}

// commands lists the subcommands in the order help shows them.
var commands = []command{serveCommand, checkCommand, resetCommand, topCommand, benchCommand, simulateCommand, versionCommand}

// Main runs the subcommand named by args[0] and returns the exit code:
// 0 success, 1 failure, 2 bad usage. Help that was asked for ("sluice
// help", -h, --help, "sluice help COMMAND", "sluice COMMAND -h") is printed
// with exit code 0; a bare "sluice" or an unknown command prints the usage
// on standard error with exit code 2.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if len(args) == 0 {
		usage(env.Stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[0] == "help" {
			if c := lookup(args[1]); c != nil {
				return c.run(ctx, env, []string{"-h"})
			}
			fmt.Fprintf(env.Stderr, "sluice help: unknown command %q\n\n", args[1])
			usage(env.Stderr)
			return 2
		}
		usage(env.Stdout)
		return 0
	}
	if c := lookup(args[0]); c != nil {
		return c.run(ctx, env, args[1:])
	}
	fmt.Fprintf(env.Stderr, "sluice: unknown command %q\n\n", args[0])
	usage(env.Stderr)
	return 2
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "sluice: a distributed sliding-window rate limiter")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: sluice <command> [flags]")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "sluice help <command>" or "sluice <command> -h" for a command's flags.`)
}

// parseExit is the exit code of a command line that fs.Parse (or a check
// after it) refused, already reported: 0 when help was asked for with -h
// or -help, 2 for bad usage.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

var versionCommand = command{
	name:    "version",
	summary: "print the version of sluice and of Go it was built with",
	run:     runVersion,
}

func runVersion(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet(env, "version", "")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "sluice version: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(env.Stdout, "sluice (unknown version: built without module information)")
		return 0
	}
	fmt.Fprintln(env.Stdout, versionText(bi))
	return 0
}

// versionText is "sluice VERSION (GOVERSION[, commit REV of TIME][, modified])"
// from the binary's build information.
func versionText(bi *debug.BuildInfo) string {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	version := bi.Main.Version
	if version == "" || version == "(devel)" {
		version = "devel" // built from a checkout, not a tagged module
	}
	fmt.Fprintf(&b, "sluice %s (%s", version, bi.GoVersion)
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, ", commit %.12s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " of %s", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(", modified")
		}
	}
	b.WriteString(")")
	return b.String()
}

// newFlagSet returns a flag set that reports errors to env.Stderr instead
// of exiting.
func newFlagSet(env Env, name, usageLine string) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "Usage: sluice %s %s\n\nFlags:\n", name, usageLine)
		fs.PrintDefaults()
	}
	return fs
}
