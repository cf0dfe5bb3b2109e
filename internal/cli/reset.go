package cli

import (
	"context"
	"fmt"
)

// resetCommand is replaced by its real implementation (work in progress).
var resetCommand = command{
	name:    "reset",
	summary: "(not built yet)",
	run: func(ctx context.Context, env Env, args []string) int {
		fmt.Fprintln(env.Stderr, "sluice reset: not built yet")
		return 1
	},
}
