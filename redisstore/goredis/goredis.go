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
// A *redis.Ring is refused. A Ring places each key on a shard by
// consistent hashing over the shards that answer its heartbeat, and runs
// a script on the shard of its first key: the other keys of a multi-hit
// check then live on a shard that never sees them (a check used up
// "ip-1"'s limit on one server while "ip-1" alone was still allowed on the
// other), and a shard that misses a heartbeat moves its keys to another
// shard, where their usage starts again from zero. Routing by hash tag
// would fix the first and not the second: a limiter's state must not move
// when a server blinks. Use a Redis Cluster (redis.ClusterClient), whose
// slots do not move without a failover that keeps the data, or one Store
// per server with the keys split by the caller.
//
// rueidis (redisstore.Dial or redisstore.New) remains the
// recommended client: its automatic pipelining gives more decisions per
// second at 64 concurrent callers (see docs/redis.md).
package goredis

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
)

// Scripter runs the Store's scripts on a go-redis client. It is safe for
// concurrent use, as go-redis clients are.
type Scripter struct {
	c       redis.Scripter
	cluster bool
}

var (
	_ redisstore.Scripter   = (*Scripter)(nil)
	_ redisstore.SlotMapper = (*Scripter)(nil)
)

// New returns a Scripter on c: a *redis.Client, *redis.ClusterClient or a
// failover (Sentinel) client. A *redis.ClusterClient is run in Cluster mode
// (hits in different hash slots in different calls). A *redis.Ring is
// refused with an error wrapping sluice.ErrInvalid (see the package doc),
// as is a nil c.
func New(c redis.Scripter) (*Scripter, error) {
	switch c.(type) {
	case nil:
		return nil, fmt.Errorf("goredis: %w: nil client", sluice.ErrInvalid)
	case *redis.Ring:
		return nil, fmt.Errorf("goredis: %w: a *redis.Ring moves keys between its shards and splits a check's keys across them, so one limit would have several states; use a *redis.ClusterClient", sluice.ErrInvalid)
	}
	_, cluster := c.(*redis.ClusterClient)
	return &Scripter{c: c, cluster: cluster}, nil
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

// ClusterSlots implements redisstore.SlotMapper for a *redis.ClusterClient
// (CLUSTER SLOTS, asked of one node); for another client it is an error
// wrapping errors.ErrUnsupported.
func (s *Scripter) ClusterSlots(ctx context.Context) ([]redisstore.SlotRange, error) {
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok {
		return nil, fmt.Errorf("goredis: CLUSTER SLOTS: %w: not a cluster client", errors.ErrUnsupported)
	}
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	ranges := make([]redisstore.SlotRange, 0, len(slots))
	for _, sl := range slots {
		if len(sl.Nodes) == 0 || sl.Start < 0 || sl.End < sl.Start || sl.End > 16383 {
			return nil, fmt.Errorf("goredis: CLUSTER SLOTS: bad range %d-%d", sl.Start, sl.End)
		}
		ranges = append(ranges, redisstore.SlotRange{First: uint16(sl.Start), Last: uint16(sl.End), Master: sl.Nodes[0].Addr})
	}
	slices.SortFunc(ranges, func(a, b redisstore.SlotRange) int { return int(a.First) - int(b.First) })
	return ranges, nil
}

func anys(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}

// NewStore returns a redisstore.Store on c with opts. The Store does not
// close c. c is as New accepts it.
func NewStore(c redis.Scripter, opts redisstore.Options) (*redisstore.Store, error) {
	sc, err := New(c)
	if err != nil {
		return nil, err
	}
	return redisstore.NewWithScripter(sc, opts)
}
