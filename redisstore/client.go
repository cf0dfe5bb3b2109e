package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
)

// rueidisScripter runs scripts on a rueidis client. rueidis pipelines
// concurrent calls on one connection automatically.
type rueidisScripter struct{ c rueidis.Client }

// EvalSha implements Scripter.
func (r rueidisScripter) EvalSha(ctx context.Context, sha1 string, keys, args []string) ([]int64, error) {
	cmd := r.c.B().Evalsha().Sha1(sha1).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	return r.c.Do(ctx, cmd).AsIntSlice()
}

// Eval implements Scripter.
func (r rueidisScripter) Eval(ctx context.Context, script string, keys, args []string) ([]int64, error) {
	cmd := r.c.B().Eval().Script(script).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	return r.c.Do(ctx, cmd).AsIntSlice()
}

// Cluster implements Scripter, from the client's mode.
func (r rueidisScripter) Cluster() bool { return r.c.Mode() == rueidis.ClientModeCluster }

// NewScripter returns the Scripter the Store uses for a rueidis client, for
// callers that wrap it (to count or trace calls) before passing it to
// NewWithScripter.
func NewScripter(c rueidis.Client) Scripter { return rueidisScripter{c} }

// A pipeliner sends plain commands, many in one round trip: the Redis
// store's cheap lane for first-sight records of keys not stored yet (a
// SET ... NX costs Redis about a fifth of a script's call per key).
// rueidisScripter implements it; a Scripter that does not is sent
// record.lua for every record.
type pipeliner interface {
	// setNX sets each of keys that does not exist to its value with its
	// TTL in ms, and reports which were set.
	setNX(ctx context.Context, keys, values []string, ttlMs []int64) ([]bool, error)
	// serverTime reads the server's clock (TIME), in µs since the epoch.
	serverTime(ctx context.Context) (int64, error)
}

func (r rueidisScripter) setNX(ctx context.Context, keys, values []string, ttlMs []int64) ([]bool, error) {
	cmds := make(rueidis.Commands, len(keys))
	for i := range keys {
		cmds[i] = r.c.B().Set().Key(keys[i]).Value(values[i]).Nx().PxMilliseconds(ttlMs[i]).Build()
	}
	set := make([]bool, len(keys))
	for i, res := range r.c.DoMulti(ctx, cmds...) {
		err := res.Error()
		switch {
		case err == nil:
			set[i] = true
		case rueidis.IsRedisNil(err):
		default:
			return nil, err
		}
	}
	return set, nil
}

func (r rueidisScripter) serverTime(ctx context.Context) (int64, error) {
	t, err := r.c.Do(ctx, r.c.B().Time().Build()).AsIntSlice()
	if err != nil {
		return 0, err
	}
	if len(t) != 2 {
		return 0, fmt.Errorf("TIME replied %d values", len(t))
	}
	return t[0]*1_000_000 + t[1], nil
}
