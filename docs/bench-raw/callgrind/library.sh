#!/bin/bash
# library.sh MODE N: instructions of redis-server, under callgrind, for N
# checks of new keys through the library (bench/cmd/edgecg): MODE sync
# (the Redis store), first (edge.Async with FirstSight 1) or setnx (the
# plain pipelined SET ... NX alone). A warm-up of 200 keys (scripts loaded)
# runs before the counters are zeroed. Run from the repository's root.
set -e
mode=$1; n=$2
out=$(mktemp -d)
RP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p" redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no >"$out/log" 2>&1 &
vpid=$!
trap 'kill $vpid 2>/dev/null; rm -rf "$out"' EXIT
until redis-cli -p "$RP" ping >/dev/null 2>&1; do sleep 0.2; done
(cd bench && go build -o "$out/edgecg" ./cmd/edgecg)
"$out/edgecg" -url "redis://127.0.0.1:$RP" -mode "$mode" -prefix warm- -n 200 >/dev/null
callgrind_control -z "$vpid" >/dev/null
"$out/edgecg" -url "redis://127.0.0.1:$RP" -mode "$mode" -prefix run- -n "$n"
callgrind_control -d "$vpid" >/dev/null
sleep 1
ir=$(callgrind_annotate "$out/cg.$vpid.1" 2>/dev/null | grep -m1 "PROGRAM TOTALS" | awk '{print $1}' | tr -d ,)
echo "$mode: $ir Redis instructions for $n new keys: $((ir / n)) per key"
