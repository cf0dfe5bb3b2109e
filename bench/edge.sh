#!/usr/bin/env bash
# bench/edge.sh runs the edge layer's Redis benchmarks (package edge) in
# interleaved rounds: each round is one `go test -bench` run in which the
# contenders share one Redis and 64 callers, side by side. It prints the
# load average before and after, and the raw output; medians and ranges are
# taken over the rounds.
#
#   bench/edge.sh [rounds] [benchtime]     # default: 5 rounds of 3s
#
# Benchmarks: HotKeys (10 keys far over their limit: the Redis store alone,
# and behind a deny cache), Spread (100,000 keys under their limits: the
# Redis store, and behind an Async limiter), DenyCacheHitCPU (the CPU of a
# deny cache hit beside the callers' loop alone).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
benchtime=${2:-3s}
uptime
for i in $(seq "$rounds"); do
	echo "# round $i"
	go test -run '^$' -bench 'HotKeys|Spread|DenyCacheHitCPU' -benchtime "$benchtime" -count 1 ./edge | grep '^Benchmark'
done
uptime
