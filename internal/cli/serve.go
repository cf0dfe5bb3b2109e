package cli

import (
	"context"
	"fmt"
)

// serveCommand is replaced by its real implementation (work in progress).
var serveCommand = command{
	name:    "serve",
	summary: "(not built yet)",
	run: func(ctx context.Context, env Env, args []string) int {
		fmt.Fprintln(env.Stderr, "sluice serve: not built yet")
		return 1
	},
}
