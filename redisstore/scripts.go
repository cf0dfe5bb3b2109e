package redisstore

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"strings"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// algorithmFiles are concatenated, in this order, before each entry
// script that needs the algorithms.
var algorithmFiles = []string{"common.lua", "window.lua", "buckets.lua", "log.lua", "decay.lua", "gcra.lua"}

// script is one Lua script with its SHA-1 digest, as EVALSHA names it.
type script struct {
	name string
	src  string
	sha  string
}

func newScript(name string, withAlgorithms bool) script {
	var b strings.Builder
	if withAlgorithms {
		for _, f := range algorithmFiles {
			b.WriteString(mustRead(f))
			b.WriteString("\n")
		}
	}
	b.WriteString(mustRead(name))
	s := newScriptSrc(b.String())
	s.name = name
	return s
}

// newScriptSrc returns the script of source src, with its digest.
func newScriptSrc(src string) script {
	sum := sha1.Sum([]byte(src))
	return script{src: src, sha: hex.EncodeToString(sum[:])}
}

func mustRead(name string) string {
	data, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic("redisstore: embedded script missing: " + name) // a build error, not a runtime one
	}
	return string(data)
}

// scripts holds the store's scripts; built once per Store (no package-level
// state).
type scripts struct {
	decide, refund, reset, record script
}

func loadScripts() scripts {
	return scripts{
		decide: newScript("decide.lua", true),
		refund: newScript("refund.lua", true),
		reset:  newScript("reset.lua", false),
		record: newScript("record.lua", true),
	}
}

// Scripter runs Lua scripts on Redis: the part of a Redis client a Store
// needs. Package redisstore implements it on a rueidis client; package
// redisstore/goredis on a go-redis client. Implementations must be safe for
// concurrent use.
type Scripter interface {
	// EvalSha runs the cached script with the given SHA-1 digest (EVALSHA).
	// All keys share one hash slot. Every script replies an array of
	// integers. When the server does not have the script, the error's text
	// must start with "NOSCRIPT", as Redis's reply does.
	EvalSha(ctx context.Context, sha1 string, keys, args []string) ([]int64, error)
	// Eval runs script (EVAL), which also caches it on the server.
	Eval(ctx context.Context, script string, keys, args []string) ([]int64, error)
	// Cluster reports whether the client talks to a Redis Cluster, where
	// the hits of a check in different hash slots need different calls.
	Cluster() bool
}

// run runs s by its digest and, when the server does not know it (a new or
// restarted node, a failover, SCRIPT FLUSH), sends its source once.
func run(ctx context.Context, c Scripter, s script, keys, args []string) ([]int64, error) {
	reply, err := c.EvalSha(ctx, s.sha, keys, args)
	if err != nil && isNoScript(err) {
		reply, err = c.Eval(ctx, s.src, keys, args)
	}
	return reply, err
}

func isNoScript(err error) bool {
	return strings.Contains(err.Error(), "NOSCRIPT")
}
