package cli

import (
	"context"
	"fmt"
)

// benchCommand is replaced by its real implementation (work in progress).
var benchCommand = command{
	name:    "bench",
	summary: "(not built yet)",
	run: func(ctx context.Context, env Env, args []string) int {
		fmt.Fprintln(env.Stderr, "sluice bench: not built yet")
		return 1
	},
}
