package cli

import (
	"context"
	"fmt"
)

// simulateCommand is replaced by its real implementation (work in progress).
var simulateCommand = command{
	name:    "simulate",
	summary: "(not built yet)",
	run: func(ctx context.Context, env Env, args []string) int {
		fmt.Fprintln(env.Stderr, "sluice simulate: not built yet")
		return 1
	},
}
