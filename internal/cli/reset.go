package cli

import (
	"context"
	"fmt"
)

var resetCommand = command{
	name:    "reset",
	summary: "make a running server forget the state of keys",
	run:     runReset,
}

func runReset(ctx context.Context, env Env, args []string) int {
	var f apiFlags
	fs := newFlagSet(env, "reset", "[flags] KEY...")
	f.register(env, fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if f.keys = fs.Args(); len(f.keys) == 0 {
		usageErrorf(fs, "give at least one key")
		return 2
	}
	base, err := parseBaseURL(f.server)
	if err != nil {
		usageErrorf(fs, "-server: %v", err)
		return 2
	}
	if _, _, err := post(ctx, base+resetPath, f.timeout, apiRequest{Zone: f.zone, Keys: f.keys}); err != nil {
		fmt.Fprintf(env.Stderr, "sluice reset: %v\n", err)
		return 1
	}
	if f.json {
		fmt.Fprintf(env.Stdout, "{\"zone\":%s,\"reset\":%d}\n", appendJSONString(nil, f.zone), len(f.keys))
		return 0
	}
	fmt.Fprintf(env.Stdout, "reset %d key(s) in zone %s\n", len(f.keys), f.zone)
	return 0
}
