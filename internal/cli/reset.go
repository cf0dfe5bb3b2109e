package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/wire"
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
	base, err := f.parse(fs, args)
	if err != nil {
		return parseExit(err)
	}
	if f.redis != "" {
		err = f.resetRedis(ctx)
	} else {
		_, _, err = post(ctx, base+resetPath, f.timeout, f.token, apiRequest{Zone: f.zone, Keys: f.keys})
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sluice reset: %v\n", err)
		if errors.Is(err, sluice.ErrInvalid) {
			return 2
		}
		return 1
	}
	if f.json {
		fmt.Fprintf(env.Stdout, "{\"zone\":%s,\"reset\":%d}\n", wire.AppendString(nil, f.zone), len(f.keys))
		return 0
	}
	fmt.Fprintf(env.Stdout, "reset %d key(s) in zone %s\n", len(f.keys), f.zone)
	return 0
}

// resetRedis forgets the keys' state on Redis directly.
func (f *apiFlags) resetRedis(ctx context.Context) error {
	limits, err := directLimits(f.limit, f.algorithm)
	if err != nil {
		return err
	}
	store, closeStore, err := openStore(f.redis, f.prefix, f.timeout)
	if err != nil {
		return err
	}
	defer closeStore()
	return store.Reset(ctx, directCheck(f.zone, f.keys, limits, 0))
}
