#!/usr/bin/env bash
# bench/run.sh runs the side-by-side comparisons of docs/bench.md in
# interleaved rounds (every contender once per round, so a noisy moment of
# a shared machine hits all of them alike) and summarizes the rounds with
# benchstat (median and spread).
#
#   bench/run.sh [memory|redis|all] [rounds]     default: all 5
#
# Raw output and the machine description go to bench/results/ (or $OUT).
# benchstat is golang.org/x/perf/cmd/benchstat; it is installed with
# `go install` when missing.
set -euo pipefail
cd "$(dirname "$0")"
what=${1:-all}
rounds=${2:-5}
out=${OUT:-results}
mkdir -p "$out"

case $what in
  memory) pattern='^BenchmarkMemory$' ;;
  redis)  pattern='^BenchmarkRedis(Memory)?$' ;;
  all)    pattern='^Benchmark(Memory|Redis|RedisMemory)$' ;;
  *) echo "usage: $0 [memory|redis|all] [rounds]" >&2; exit 2 ;;
esac

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "uptime: $(uptime)"
  echo "nproc: $(nproc)"
  lscpu | head -n 15
  go version
  command -v redis-server >/dev/null && redis-server --version
} >"$out/machine-$what.txt"
cat "$out/machine-$what.txt"

go test -c -o "$out/bench.test" .
: >"$out/$what.txt"
for r in $(seq "$rounds"); do
  echo "== round $r of $rounds: $(uptime)"
  "$out/bench.test" -test.run '^$' -test.bench "$pattern" -test.benchtime 1s | tee -a "$out/$what.txt"
done
echo "uptime after: $(uptime)" | tee -a "$out/machine-$what.txt"

benchstat=$(command -v benchstat || echo "$(go env GOPATH)/bin/benchstat")
[ -x "$benchstat" ] || GOFLAGS= go install golang.org/x/perf/cmd/benchstat@latest
"$benchstat" -col /limiter "$out/$what.txt" | tee "$out/$what-benchstat.txt"
