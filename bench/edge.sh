#!/usr/bin/env bash
# bench/edge.sh runs the edge layer's Redis benchmarks (package edge) in
# interleaved rounds: each round is one `go test -bench` run in which the
# contenders share one Redis and 64 callers, side by side. It prints the
# load average before and after, and the raw output; medians and ranges are
# taken over the rounds.
#
#   bench/edge.sh [rounds] [benchtime]     # default: 5 rounds of 3s
#
# Benchmarks: HotKeys (10 keys of 100r/s offered far more: the Redis store
# alone, behind a deny cache, behind an Async limiter; xlimit is what each
# admitted over limit x time), HotKeysAdmission (the three at the same time,
# each on its own hot keys: what each layer admitted over the store's,
# xstore, and each one's errors), Spread (100,000 keys under their limits: the
# Redis store, and behind an Async limiter), FirstSight (keys each checked
# about once: the store, Async, Async with FirstSight 1), DenyCacheHitCPU
# (the CPU of a deny cache hit beside the callers' loop alone). Every
# store uses the Redis store's default 50 ms timeout; "errors" counts the
# checks that failed.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
benchtime=${2:-3s}
uptime; cat /proc/loadavg
for i in $(seq "$rounds"); do
	echo "# round $i"
	go test -run '^$' -bench 'HotKeys|Spread|FirstSight|DenyCacheHitCPU' -benchtime "$benchtime" -count 1 ./edge | grep '^Benchmark'
done
uptime; cat /proc/loadavg
