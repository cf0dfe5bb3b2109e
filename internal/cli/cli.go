// Package cli implements the sluice command's subcommands. Each subcommand
// lives in its own file and is listed in commands; nothing here calls
// os.Exit or reads the process environment except through Env.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
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
var commands = []command{serveCommand, checkCommand, resetCommand, benchCommand, simulateCommand}

// Main runs the subcommand named by args[0] and returns the exit code:
// 0 success, 1 failure, 2 bad usage.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(env.Stdout)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	fmt.Fprintf(env.Stderr, "sluice: unknown command %q\n\n", args[0])
	usage(env.Stderr)
	return 2
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
	fmt.Fprintln(w, `Run "sluice <command> -h" for a command's flags.`)
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
