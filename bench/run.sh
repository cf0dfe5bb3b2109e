#!/usr/bin/env bash
# bench/run.sh runs the side-by-side comparisons of docs/bench.md in
# interleaved rounds (every contender once per round, so a noisy moment of
# a shared machine hits all of them alike) and summarizes the rounds with
# cmd/benchtable: Markdown tables of the median and the range of the rounds.
#
#   bench/run.sh [memory|redis|ab|all] [rounds]     default: all 5
#
# ab runs only sluice's sliding window and the minimal script, spread, so
# many short rounds fit in a minute: the head-to-head ratio with less noise.
#
# Raw output, the machine description and the tables go to bench/results/
# (or $OUT).
set -euo pipefail
cd "$(dirname "$0")"
what=${1:-all}
rounds=${2:-5}
out=${OUT:-results}
mkdir -p "$out"

case $what in
  memory) pattern='^BenchmarkMemory$' ;;
  redis)  pattern='^BenchmarkRedis(Memory|Shapes)?$' ;;
  ab)     pattern='^BenchmarkRedis$/workload=spread/limiter=(sluice-sliding-window|minimal-script)$' ;;
  all)    pattern='^Benchmark(Memory|Redis|RedisMemory|RedisShapes)$' ;;
  *) echo "usage: $0 [memory|redis|ab|all] [rounds]" >&2; exit 2 ;;
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

ratios=
if [ "$what" = memory ]; then
  # The ratios docs/bench.md's memory section reports, round by round.
  ratios=sluice-sliding-window/go-limiter,sluice-sliding-window/x-time-rate,sluice-gcra/go-limiter,sluice-gcra/x-time-rate,sluice-buckets/sluice-sliding-window,sluice-log/sluice-sliding-window,sluice-decay/sluice-sliding-window
fi
go run ./cmd/benchtable -metrics 'ns/op,cpu-ns/op,allocs/op,B/op,decisions/s,p50-µs,p99-µs,redis-cpu-µs/op,errors,warmup-errors,B/key,redis-keys/key' \
  -ratios "$ratios" -ratio-metric cpu-ns/op "$out/$what.txt" | tee "$out/$what-tables.md"
