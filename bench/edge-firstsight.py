#!/usr/bin/env python3
"""bench/edge-firstsight.py: first sight over HTTP and nginx.

Three `sluice serve` processes over one local redis-server, each with the
same zone (100r/m per key, the key from the query's token): a sync zone, an
async zone, and an async zone with `first_sight: 1`. Two fronts each:

  check    POST /v1/check, driven by `sluice bench` (64 keep-alive
           connections, 100,000 keys)
  auth     nginx (2 workers) with auth_request to the server's /v1/auth
           (examples/nginx.conf's pattern), driven by wrk -t2 -c64 with
           random tokens among 100,000

Every round uses keys no server has seen (a zone per round for `check`, a
token prefix per round for `auth`), so each key is checked about once or
twice: the workload first sight is for. The servers run in interleaved
rounds (after a warm-up round each, not reported); per round it reads the
CPU of the server (and of the nginx workers, for auth) and of Redis from
/proc, until 0.5 s after the load (what an async zone still owes is sent
in that time: its run pays for it), and Redis's calls per request of
EVALSHA (scripts: synchronous checks, flushes), SET (first-sight records,
and the SETs scripts run) and TIME, with the µs Redis spent in each (INFO
commandstats); it reports medians, the per-round ratios to the sync zone's, and
the spread over rounds.

  bench/edge-firstsight.py [-rounds 5] [-d 5] [-fronts check,auth]

Run it on a quiet machine; it prints the load average before and after.
"""
import argparse, json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchproc import TICK, children, cpu_ticks, free_port, wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = 100000
MODES = (("sync", "mode: sync"), ("async", "mode: async"), ("first-sight", "mode: async, first_sight: 1"))


WRK_LUA = r"""
local n = tonumber(os.getenv("TOKENS"))
local path = os.getenv("WRK_PATH")
local prefix = os.getenv("PREFIX")
math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)"), 16) or 0))
request = function()
  return wrk.format(nil, path .. "?token=" .. prefix .. math.random(1, n))
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %d %d\n", summary.requests, summary.duration,
    latency:percentile(99), summary.errors.status))
end
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-rounds", type=int, default=5)
    ap.add_argument("-d", type=int, default=5, help="seconds per round")
    ap.add_argument("-fronts", default="check,auth")
    ap.add_argument("-c", type=int, default=64)
    args = ap.parse_args()
    fronts = args.fronts.split(",")
    for tool in ["redis-server", "go"] + (["wrk"] if "auth" in fronts else []):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    d = tempfile.mkdtemp(prefix="sluice-firstsight-bench-")
    procs = []

    def spawn(cmd, **kw):
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, os.path.basename(cmd[0]) + ".log"), "a"), **kw)
        procs.append(p)
        return p

    try:
        subprocess.run(["go", "build", "-o", os.path.join(d, "sluice"), "./cmd/sluice"], cwd=ROOT, check=True)
        rport, up_port, front_port = free_port(), free_port(), free_port()
        redis = spawn(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        wait_port(rport)
        zones = args.rounds + 1  # a warm-up round, then one zone per round
        serves, ports = {}, {}
        for name, mode in MODES:
            ports[name] = free_port()
            with open(os.path.join(d, name + ".yaml"), "w") as f:
                f.write(f"""store: {{url: "redis://127.0.0.1:{rport}"}}
log: {{level: warn}}
listeners: [{{addr: "127.0.0.1:{ports[name]}", serve: api}}]
zones:
""")
                # Zones of their own per server: no server sees another's keys.
                for i in range(zones):
                    f.write(f'  - {{name: "{name}-{i}", limits: "100r/m", key: "query:token", {mode}}}\n')
                f.write(f'  - {{name: "{name}", limits: "100r/m", key: "query:token", {mode}}}\n')
            serves[name] = spawn([os.path.join(d, "sluice"), "serve", "-config", os.path.join(d, name + ".yaml")])
        for p in ports.values():
            wait_port(p)
        workers = []
        if "auth" in fronts:
            locations = "".join(
                f"""        location /{name} {{ auth_request /_{name}; error_page 403 = @denied; proxy_pass http://app; }}
        location = /_{name} {{ internal; proxy_pass http://{name.replace('-', '_')}_api/v1/auth?zone={name}; proxy_pass_request_body off; proxy_set_header Content-Length ""; proxy_set_header X-Original-URI $request_uri; }}
""" for name, _ in MODES)
            upstreams = "".join(f"    upstream {name.replace('-', '_')}_api {{ server 127.0.0.1:{ports[name]}; keepalive 64; }}\n" for name, _ in MODES)
            conf = f"""daemon off;
worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {d}/cb; proxy_temp_path {d}/px; fastcgi_temp_path {d}/fc; uwsgi_temp_path {d}/uw; scgi_temp_path {d}/sc;
    upstream app {{ server 127.0.0.1:{up_port}; keepalive 64; }}
{upstreams}    server {{
        listen 127.0.0.1:{front_port} reuseport backlog=4096;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
{locations}        location @denied {{ return 429; }}
    }}
}}
"""
            up_conf = f"""daemon off; worker_processes 1; pid {d}/up.pid; error_log {d}/up-error.log warn;
events {{ worker_connections 4096; }}
http {{ access_log off; client_body_temp_path {d}/ucb; proxy_temp_path {d}/upx; fastcgi_temp_path {d}/ufc; uwsgi_temp_path {d}/uuw; scgi_temp_path {d}/usc;
  server {{ listen 127.0.0.1:{up_port}; location / {{ return 200 "ok\\n"; }} }} }}
"""
            for name, text in (("front.conf", conf), ("up.conf", up_conf)):
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            spawn([nginx, "-p", d + "/", "-c", os.path.join(d, "up.conf")])
            front = spawn([nginx, "-p", d + "/", "-c", os.path.join(d, "front.conf")])
            wait_port(up_port)
            wait_port(front_port)
            time.sleep(0.5)
            workers = children(front.pid)
            with open(os.path.join(d, "wrk.lua"), "w") as f:
                f.write(WRK_LUA)

        def cmdstats():
            # Redis's calls and µs per command so far (INFO commandstats).
            out = subprocess.run(["redis-cli", "-p", str(rport), "INFO", "commandstats"],
                                 capture_output=True, text=True, check=True).stdout
            st = {}
            for m in re.finditer(r"cmdstat_([^:]+):calls=(\d+),usec=(\d+)", out):
                st[m.group(1)] = (int(m.group(2)), int(m.group(3)))
            return st

        def run(front, name, i, secs):
            spids, fpids = [serves[name].pid], (workers if front == "auth" else [])
            c0 = cmdstats()
            s0, f0, r0 = cpu_ticks(spids), cpu_ticks(fpids), cpu_ticks([redis.pid])
            if front == "check":
                out = subprocess.run([os.path.join(d, "sluice"), "bench", "-server", f"http://127.0.0.1:{ports[name]}",
                                      "-zone", f"{name}-{i}", "-keys", str(KEYS), "-c", str(args.c), "-d", f"{secs}s", "-json"],
                                     capture_output=True, text=True, check=True).stdout
                r = json.loads(out)
                n, rps, p99, errors = r["decisions"], r["decisions_per_s"], r["latency_us"]["p99"], r["errors"]
            else:
                env = dict(os.environ, TOKENS=str(KEYS), WRK_PATH="/" + name, PREFIX=f"r{i}-")
                out = subprocess.run(["wrk", "-t2", f"-c{args.c}", f"-d{secs}s", "-s", os.path.join(d, "wrk.lua"),
                                      f"http://127.0.0.1:{front_port}"], env=env, capture_output=True, text=True, check=True).stdout
                m = re.search(r"RESULT (\d+) (\d+) (\d+) (\d+)", out)
                n, dur, p99, errors = (int(x) for x in m.groups())
                rps = n / (dur / 1e6)
            # What an async zone still owes when the load stops is sent
            # within a round or two: counted in this run, not the next.
            time.sleep(0.5)
            s1, f1, r1 = cpu_ticks(spids), cpu_ticks(fpids), cpu_ticks([redis.pid])
            c1 = cmdstats()
            us = 1e6 / TICK
            n = max(n, 1)
            calls = {k: ((c - c0.get(k, (0, 0))[0]) / n, (u - c0.get(k, (0, 0))[1]) / n) for k, (c, u) in c1.items()
                     if k in ("evalsha", "set", "time") and c > c0.get(k, (0, 0))[0]}
            return {"rps": rps, "p99": p99, "errors": errors, "server": (s1 - s0) * us / n,
                    "nginx": (f1 - f0) * us / n, "redis": (r1 - r0) * us / n, "calls": calls}

        print("load average before:", open("/proc/loadavg").read().strip())
        print(f"{args.rounds} interleaved rounds of {args.d}s per server, after a warm-up round each; "
              f"{KEYS:,} keys per round, new every round; 100r/m per key; 64 connections")
        for front in fronts:
            for name, _ in MODES:
                run(front, name, 0, 2)  # warm-up
            res = {name: [] for name, _ in MODES}
            for i in range(1, args.rounds + 1):
                for name, _ in MODES:
                    res[name].append(run(front, name, i, args.d))
                    r = res[name][-1]
                    print(f"  {front} {name} round {i}: {r['rps']:,.0f} requests/s, {r['errors']} errors, "
                          f"server {r['server']:.1f} µs, nginx {r['nginx']:.1f} µs, Redis {r['redis']:.1f} µs per request; Redis calls per request: "
                          + ", ".join(f"{k} {c:.3f} ({u:.1f} µs in it)" for k, (c, u) in sorted(r["calls"].items())))
            what = "POST /v1/check (sluice bench)" if front == "check" else "nginx auth_request (wrk -t2)"
            print(f"\n### {what}\n")
            print("| zone | requests/s | vs sync | server CPU/request | vs sync | Redis CPU/request | vs sync | errors/round |")
            print("|---|---|---|---|---|---|---|---|")
            base = res["sync"]
            for name, _ in MODES:
                r = res[name]
                med = lambda k: statistics.median(x[k] for x in r)

                def ratio(k):
                    v = sorted(x[k] / max(b[k], 1e-9) for x, b in zip(r, base))
                    return f"{statistics.median(v):.2f}x [{v[0]:.2f}–{v[-1]:.2f}]"
                print(f"| {name} | {med('rps'):,.0f} | {ratio('rps')} | {med('server'):.1f} µs | {ratio('server')} | "
                      f"{med('redis'):.1f} µs | {ratio('redis')} | {max(x['errors'] for x in r)} |")
        print("\nload average after:", open("/proc/loadavg").read().strip())
    finally:
        for p in reversed(procs):
            try:
                p.send_signal(signal.SIGQUIT if os.path.basename(p.args[0]) == "nginx" else signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
