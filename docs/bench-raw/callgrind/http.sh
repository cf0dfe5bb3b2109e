#!/bin/bash
# http.sh N: instructions of redis-server, under callgrind, per POST
# /v1/check of a new key: a server with a sync zone against one with an
# async zone with first_sight: 1, each sent N checks by sluice bench (16
# connections) after a warm-up, counters zeroed between. Also prints
# Redis's command counts of each phase. Run from the repository's root.
set -e
n=$1
out=$(mktemp -d)
fp() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
go build -o "$out/sluice" ./cmd/sluice
RP=$(fp)
valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p" redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no >"$out/log" 2>&1 &
vpid=$!
pids=()
trap 'kill "${pids[@]}" $vpid 2>/dev/null; rm -rf "$out"' EXIT
until redis-cli -p "$RP" ping >/dev/null 2>&1; do sleep 0.2; done
for m in "sync:mode: sync" "fs:mode: async, first_sight: 1"; do
	name=${m%%:*}; mode=${m#*:}; port=$(fp); echo "$port" >"$out/$name.port"
	# Zones of their own per server: no server sees the other's keys.
	printf 'store: {url: "redis://127.0.0.1:%s", timeout: 5s}\nlog: {level: warn}\nlisteners: [{addr: "127.0.0.1:%s", serve: api}]\nzones:\n  - {name: w%s, limits: "100r/m", key: "query:token", %s}\n  - {name: z%s, limits: "100r/m", key: "query:token", %s}\n' \
		"$RP" "$port" "$name" "$mode" "$name" "$mode" >"$out/$name.yaml"
	"$out/sluice" serve -config "$out/$name.yaml" >"$out/$name.log" 2>&1 &
	pids+=($!)
done
sleep 2
for name in sync fs; do
	"$out/sluice" bench -server "http://127.0.0.1:$(cat "$out/$name.port")" -zone "w$name" -keys 200 -c 16 -n 400 -timeout 30s >/dev/null
done
sleep 1
for name in sync fs; do
	callgrind_control -z "$vpid" >/dev/null
	redis-cli -p "$RP" config resetstat >/dev/null
	"$out/sluice" bench -server "http://127.0.0.1:$(cat "$out/$name.port")" -zone "z$name" -keys 1000000 -c 16 -n "$n" -timeout 30s >/dev/null
	sleep 1.5 # the first-sight records of the last round
	callgrind_control -d "$vpid" >/dev/null
	redis-cli -p "$RP" info commandstats | grep -E 'evalsha|cmdstat_set|cmdstat_get|cmdstat_time'
	sleep 0.5
	f=$(ls -t "$out"/cg."$vpid".* | head -1)
	ir=$(callgrind_annotate "$f" 2>/dev/null | grep -m1 "PROGRAM TOTALS" | awk '{print $1}' | tr -d ,)
	echo "$name: $ir Redis instructions for $n requests: $((ir / n)) per request"
done
