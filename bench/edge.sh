#!/usr/bin/env bash
# bench/edge.sh runs the edge layer's Redis benchmarks (package edge) in
# interleaved rounds: each round is one `go test -bench` run in which the
# contenders share one Redis and 64 callers, side by side. It prints the
# load average before and after, the raw output, and a summary: per
# benchmark, the median and range over the rounds of decisions/s and of
# its ratio to the store alone in the same round, Redis CPU per decision,
# and the failed checks of every round.
#
#   bench/edge.sh [rounds] [benchtime] [pattern]   # default: 5 rounds of 3s, every benchmark
#   bench/edge.sh 10 3s 'Spread|HotKeys$'          # the 0-failed-checks-in-10-rounds goal
#
# Benchmarks: HotKeys (10 keys of 100r/s offered far more: the Redis store
# alone, behind a deny cache, behind an Async limiter; xlimit is what each
# admitted over limit x time), HotKeysAdmission (the three at the same time,
# each on its own hot keys: what each layer admitted over the store's,
# xstore, each one's errors, what the store admitted after the first
# caller ended, left out, and maxest, the sliding window's estimate
# replayed from each layer's admissions: the exact check), Spread (100,000 keys under their limits: the
# Redis store, and behind an Async limiter), FirstSight (keys each checked
# about once: the store, Async, Async with FirstSight 1, on a Redis that
# grows), FirstSightSteady (the same where keys expire as fast as new ones
# come, after a warm-up: Redis's steady state), DenyCacheHitCPU
# (the CPU of a deny cache hit beside the callers' loop alone). Every
# store uses the Redis store's default 50 ms timeout; "errors" counts the
# checks that failed.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
benchtime=${2:-3s}
pattern=${3:-HotKeys|Spread|FirstSight|DenyCacheHitCPU}
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
uptime; cat /proc/loadavg
go test -c -o "$raw.test" ./edge
trap 'rm -f "$raw" "$raw.test"' EXIT
for i in $(seq "$rounds"); do
	echo "# round $i"
	(cd edge && "$raw.test" -test.run '^$' -test.bench "$pattern" -test.benchtime "$benchtime" -test.count 1) | grep '^Benchmark' | tee -a "$raw"
done
uptime; cat /proc/loadavg
python3 - "$raw" <<'PY'
import re, statistics, sys
rows = {}  # name -> list per round of {metric: value}
for line in open(sys.argv[1]):
    f = line.split()
    name = re.sub(r"-\d+$", "", f[0])
    m = {f[i + 1]: float(f[i]) for i in range(2, len(f) - 1, 2) if re.match(r"^-?[\d.e+]+$", f[i])}
    rows.setdefault(name, []).append(m)
def rng(v, fmt):
    v = sorted(v)
    return f"{fmt(statistics.median(v))} [{fmt(v[0])}–{fmt(v[-1])}]"
print("\n| benchmark | decisions/s | vs store, per round | CPU/decision | vs store | Redis CPU/decision | vs store | failed checks per round |")
print("|---|---|---|---|---|---|---|---|")
for name, runs in rows.items():
    dps = [r.get("decisions/s") for r in runs if "decisions/s" in r]
    if not dps:
        continue
    base = rows.get(name.rsplit("/", 1)[0] + "/store")
    def ratio(k):
        if not base or name.endswith("/store") or len(base) != len(runs) or any(k not in r for r in runs + base):
            return ""
        return rng([r[k] / max(b[k], 1e-9) for r, b in zip(runs, base)], lambda x: f"{x:.2f}x")
    def col(k):
        v = [r[k] / 1000 for r in runs if k in r]
        return rng(v, lambda x: f"{x:.1f} µs") if v else ""
    errs = " ".join(str(int(r.get("errors", 0))) for r in runs)
    print(f"| {name} | {rng(dps, lambda x: f'{x:,.0f}')} | {ratio('decisions/s')} | {col('cpu-ns/op')} | {ratio('cpu-ns/op')} | "
          f"{col('redis-cpu-ns/op')} | {ratio('redis-cpu-ns/op')} | {errs} |")
for name, runs in rows.items():
    if "async-xstore" in runs[0]:
        print(f"\n{name}: admitted over the store's: deny cache {rng([r['denycache-xstore'] for r in runs], lambda x: f'{x:.3f}x')}, "
              f"async {rng([r['async-xstore'] for r in runs], lambda x: f'{x:.3f}x')}; failed checks per round: store "
              + " ".join(str(int(r['store-errors'])) for r in runs) + ", deny cache "
              + " ".join(str(int(r['denycache-errors'])) for r in runs) + ", async "
              + " ".join(str(int(r['async-errors'])) for r in runs))
        if all("store-tail-allowed" in r and r.get("store-allowed") for r in runs):
            print(f"{name}: left out, what the store admitted after the first caller ended: "
                  + rng([100 * r['store-tail-allowed'] / r['store-allowed'] for r in runs], lambda x: f"{x:.1f}%")
                  + f" of its admissions, over {rng([r['tail-ms'] for r in runs], lambda x: f'{x:.0f} ms')}; "
                  + "async's cost the store refused: " + " ".join(str(int(r.get('async-unrecorded', 0))) for r in runs))
        if all("async-maxest" in r for r in runs):
            print(f"{name}: the sliding window's estimate just after an admission, at most (limit 100): "
                  + ", ".join(f"{who} " + " ".join(f"{r[key + '-maxest']:.1f}" for r in runs)
                              for who, key in (("store", "store"), ("deny cache", "denycache"), ("async", "async"))))
PY
