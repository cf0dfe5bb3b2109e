#!/usr/bin/env bash
# bench/edge-http.sh compares `POST /v1/check` on two `sluice serve`
# processes over one local redis-server: one whose zone is synchronous, one
# whose zone is async (same limits), driven by `sluice bench` (64 keep-alive
# connections, 10,000 keys under their limits) in alternating rounds, after
# a warm-up round each (not reported) in which the keys are first seen.
#
#   bench/edge-http.sh [rounds] [duration]     # default: 5 rounds of 5s
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
d=${2:-5s}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
go build -o "$dir/sluice" ./cmd/sluice
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$dir/redis.log" 2>&1 &
until redis-cli -p "$rport" ping >/dev/null 2>&1; do sleep 0.1; done
for mode in sync async; do
	port=$(free_port)
	cat >"$dir/$mode.yaml" <<YAML
store: {url: "redis://127.0.0.1:$rport"}
listeners: [{addr: "127.0.0.1:$port"}]
zones:
  - {name: z, limits: 1000000r/h, mode: $mode}
YAML
	"$dir/sluice" serve -config "$dir/$mode.yaml" -log-level warn >"$dir/$mode.log" 2>&1 &
	eval "${mode}_url=http://127.0.0.1:$port"
done
for url in "$sync_url" "$async_url"; do
	until curl -fs "$url/readyz" >/dev/null 2>&1; do sleep 0.1; done
done
uptime
for i in $(seq "$rounds"); do
	for mode in sync async; do
		url=${mode}_url
		printf '%s round %d: ' "$mode" "$i"
		"$dir/sluice" bench -server "${!url}" -zone z -keys 10000 -c 64 -d "$d" -json |
			python3 -c 'import json,sys; r=json.load(sys.stdin); l=r["latency_us"]; print("%.0f decisions/s, %d errors, p50 %.0f us, p99 %.0f us" % (r["decisions_per_s"], r["errors"], l["p50"], l["p99"]))'

	done
done
uptime
curl -fs "$async_url/metrics" | grep -E '^sluice_async_(decisions_total|flushes_total|unrecorded|dropped)' || true
