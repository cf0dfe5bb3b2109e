#!/bin/sh
# usage: bench.sh ROUNDS BENCHREGEX BENCHTIME binaries...
rounds=$1; re=$2; bt=$3; shift 3
cd /work/wt/edge-second/edge
for r in $(seq $rounds); do
  for b in "$@"; do
    echo "# round $r $b load $(cut -d' ' -f1-3 /proc/loadavg)"
    /tmp/es/$b.test -test.run '^$' -test.bench "$re" -test.benchtime $bt 2>&1 | grep -E "^Benchmark|failed" | sed "s/^/$b /"
  done
done
