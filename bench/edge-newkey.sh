#!/usr/bin/env bash
# bench/edge-newkey.sh: what creating a key costs Redis, the work of a
# first-sight record, in the encodings a record could take and
# on a Redis that grows against one in a steady state.
#
#   bench/edge-newkey.sh [keys]     # default 500,000 keys per case (about 1-2 min)
#
# It starts its own redis-server (no persistence, a Unix socket in a
# temporary directory) and drives it with redis-benchmark: 4 connections,
# 128 commands pipelined per round trip, keys of the Redis store's shape
# and length ("sluice:z{tok-<12 digits>}:w60000000", 35 bytes) with a
# 24-byte value (a sliding window's state). Per case it prints Redis's CPU
# (INFO cpu: user + system, all its threads) per key written, and the
# time SET took per call as Redis measured it (INFO commandstats: wall
# time, so it grows on a loaded machine, unlike the CPU).
#
# Cases:
#   grow      SET NX PX 60s on an empty Redis (a fresh process, then again
#             after FLUSHALL SYNC, then on top of those keys): the keys
#             outlive the run, so Redis's tables and memory grow
#   encodings on a fresh Redis each: SET NX with no TTL, SET NX EX 60, SET
#             NX PX 60000, and SET NX PX with a key of 70 bytes
#   steady    SET NX PX 1500 in back-to-back batches: after the first,
#             keys expire as fast as new ones come, so Redis reuses their
#             memory and sized tables, and pays for each key's expiry
#             (counted here, as it is in production)
set -euo pipefail
n=${1:-500000}
dir=$(mktemp -d)
sock=$dir/redis.sock
pid=
stop() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
trap 'stop; rm -rf "$dir"' EXIT
start() {
	stop
	redis-server --port 0 --unixsocket "$sock" --save '' --appendonly no --dir "$dir" >"$dir/log" 2>&1 &
	pid=$!
	for _ in $(seq 50); do redis-cli -s "$sock" ping >/dev/null 2>&1 && return; sleep 0.1; done
	echo "redis-server did not start" >&2; exit 1
}
r() { redis-cli -s "$sock" "$@"; }
cpu() { r info cpu | awk -F: '/^used_cpu_(user|sys):/{s+=$2} END{printf "%.6f", s}'; }
val=abcdefghijklmnopqrstuvwx # 24 bytes
key='sluice:z{tok-__rand_int__}:w60000000'
long='sluice:z{tok-__rand_int__-0123456789abcdef0123456789abcdef}:w60000000'
# run LABEL KEY ARGS...: n SETs, and what they cost Redis per key.
run() {
	local label=$1 k=$2
	shift 2
	r config resetstat >/dev/null
	local c0 e0
	c0=$(cpu)
	e0=$(r info stats | awk -F: '/^expired_keys:/{print $2+0}')
	redis-benchmark -s "$sock" -c 4 -P 128 -n "$n" -r 1000000000 SET "$k" "$val" "$@" >/dev/null
	local c1 e1 us
	c1=$(cpu)
	e1=$(r info stats | awk -F: '/^expired_keys:/{print $2+0}')
	us=$(r info commandstats | sed -n 's/^cmdstat_set:.*usec_per_call=\([0-9.]*\).*/\1/p' | tr -d '\r')
	printf '| %s | %s | %.2f µs | %s µs | %s | %s |\n' "$label" "$*" \
		"$(python3 -c "print(($c1 - $c0) / $n * 1e6)")" "$us" "$((e1 - e0))" "$(r dbsize)"
}
uptime
cat /proc/loadavg
echo
echo "| case | SET options | Redis CPU per key | SET µs per call (wall) | keys expired meanwhile | keys after |"
echo "|---|---|---|---|---|---|"
start
run "grow: fresh process" "$key" NX PX 60000
r flushall sync >/dev/null
run "grow: after FLUSHALL" "$key" NX PX 60000
run "grow: on top of those" "$key" NX PX 60000
for opts in "NX" "NX EX 60" "NX PX 60000"; do
	start
	# shellcheck disable=SC2086 # the options are words
	run "encoding, fresh process" "$key" $opts
done
start
run "encoding, 70-byte key" "$long" NX PX 60000
start
for i in 1 2 3 4 5; do
	run "steady: batch $i" "$key" NX PX 1500
done
echo
uptime
cat /proc/loadavg
