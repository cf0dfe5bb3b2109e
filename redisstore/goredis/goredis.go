// Package goredis lets a Store run on a go-redis client
// (github.com/redis/go-redis/v9), for programs that already hold one. It is
// a separate package so that package redisstore does not make every user
// compile go-redis.
//
// go-redis retries a command after some network errors (Options.MaxRetries,
// 3 by default, whatever the command): a script call that reached Redis but
// whose reply was lost is then run again, and the check is recorded twice.
// For exact counting, give the client MaxRetries: -1 (the Store's failure
// handling, not the client, should decide what a failed call means).
//
// rueidis (redisstore.Dial or redisstore.New) remains the
// recommended client: its automatic pipelining gives more decisions per
// second at 64 concurrent callers (see docs/redis.md).
package goredis

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/redisstore"
)

// Scripter runs the Store's scripts on a go-redis client. It is safe for
// concurrent use, as go-redis clients are.
type Scripter struct {
	c       redis.Scripter
	cluster bool
}

var _ redisstore.Scripter = (*Scripter)(nil)

// New returns a Scripter on c: a *redis.Client, *redis.ClusterClient,
// *redis.Ring or a failover (Sentinel) client. A *redis.ClusterClient is
// run in Cluster mode (hits in different hash slots in different calls).
func New(c redis.Scripter) *Scripter {
	_, cluster := c.(*redis.ClusterClient)
	return &Scripter{c: c, cluster: cluster}
}

// EvalSha implements redisstore.Scripter. go-redis's NOSCRIPT error reply
// reads "NOSCRIPT ...", as the Store expects.
func (s *Scripter) EvalSha(ctx context.Context, sha1 string, keys, args []string) ([]int64, error) {
	return s.c.EvalSha(ctx, sha1, keys, anys(args)...).Int64Slice()
}

// Eval implements redisstore.Scripter.
func (s *Scripter) Eval(ctx context.Context, script string, keys, args []string) ([]int64, error) {
	return s.c.Eval(ctx, script, keys, anys(args)...).Int64Slice()
}

// Cluster implements redisstore.Scripter: whether c is a
// *redis.ClusterClient.
func (s *Scripter) Cluster() bool { return s.cluster }

func anys(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}

// NewStore returns a redisstore.Store on c with opts. The Store does not
// close c.
func NewStore(c redis.Scripter, opts redisstore.Options) (*redisstore.Store, error) {
	return redisstore.NewWithScripter(New(c), opts)
}
