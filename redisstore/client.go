package redisstore

import (
	"context"

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
