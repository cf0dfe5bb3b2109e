package cli

import (
	"context"
	"fmt"
)

// checkCommand is replaced by its real implementation (work in progress).
var checkCommand = command{
	name:    "check",
	summary: "(not built yet)",
	run: func(ctx context.Context, env Env, args []string) int {
		fmt.Fprintln(env.Stderr, "sluice check: not built yet")
		return 1
	},
}
