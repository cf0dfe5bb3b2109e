#!/usr/bin/env python3
"""bench/openresty.py: nginx in front of one upstream, like for like.

Fronts, each in an nginx of its own (2 workers, the same configuration)
before the same upstream (an nginx answering 200), on one local
redis-server:

  seed     seed 000's algorithm in access_by_lua: GET the previous minute,
           INCR the current one, EXPIRE, pipelined (lua-resty-redis)
  module   sluice's OpenResty module: access() in access_by_lua
           (sync; async; sync with the deny cache)
  auth     auth_request to `sluice serve` on the same Redis
           (examples/nginx.conf's pattern; a sync zone, an async zone)

Rows (wrk -t2 -c64, random tokens in the query string):

  sync     100,000 tokens under their limits: seed, module sync, auth sync
  async    the same traffic:                  seed, module sync, module async,
                                              auth sync, auth async
  async1k  1,000 tokens, most over their limits after a few seconds:
                                              seed, module sync, module async,
                                              auth sync, auth async
  hot      10 tokens far over their limits:   seed, module deny cache, auth sync

The module async runs with the module's default options unless
-first-sight is given (the auth async zone gets the same first_sight).

Each row runs its fronts in interleaved rounds (after one warm-up round
each; each round starts one front later than the last), and reports per front the median requests/s, the per-round ratio to
the seed of the same round, the median p99, the CPU per request of the
front processes (nginx workers, and sluice serve for auth) and of Redis,
read from /proc.

  bench/openresty.py [-rounds 5] [-d 5] [-rows sync,async,hot] [-first-sight N]
                     [-fronts sync,async]
                     [-stats] [-before DIR] [-sluice-before BIN] [-vs sync]
                     [-rate N] [-fresh]

-stats prints the async limiter's counters of each worker after a row
(first sights, local and Redis decisions, views, evictions, failed
flushes). -before DIR adds to the async row the module async of another
version, its openresty/lib under DIR (git archive COMMIT openresty/lib |
tar -x -C DIR), in rounds interleaved with the others (also in async1k).
-sluice-before BIN adds to both rows auth_request to an async zone of
`BIN serve`, a sluice built from another version, interleaved likewise.
-vs sync adds, per front, the range of its per-round ratios of requests/s
and p99 to the module sync's of the same round (the goal of async:
requests/s at least 1x, p99 at most 1x). -rate N offers every front about
N requests/s (each connection waits a think time between requests, as
wrk's delay()) instead of as many as it can take: fronts of unequal speed
then compare their latency at the same load, which a closed loop on two
cores does not give (the faster front's load generator takes more CPU).
-fresh reloads each front's nginx (new workers, warmed for a second)
before each of its rounds, and restarts an auth_request front's sluice
serve: LuaJIT's traces depend on the order in which a worker's code first
got hot, and a front started once keeps one draw of them (or one
process's heap and pools) through every round, a bias of its own in
every round.

A quick look at one row: bench/openresty.py -rows hot -rounds 2 -d 3.
With -floor each row also runs what nginx costs without the module: a
plain proxy_pass (sync, async), a bare `return 429` and a Lua constant
denial with the module's fields and body (hot).
Instructions per request instead, steady on a busy machine (valgrind;
about 15 minutes): bench/openresty.py -callgrind (every front and floor;
-cg-fronts deny,floor429 picks some by path).

Run it on a quiet machine; it prints the load average before and after.
"""
import argparse, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchproc import TICK, children, cpu_ticks, free_port, wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


SEED_LUA = r"""
local redis = require "nginx.redis"
local limit = 100
local red = redis:new()
red:set_timeout(50)
local ok, err = red:connect("127.0.0.1", REDIS_PORT)
if not ok then return ngx.exit(500) end
local token = ngx.var.arg_token
local now = ngx.time()
local minute = now - now % 60
local cur, prev = token .. ":" .. minute, token .. ":" .. (minute - 60)
red:init_pipeline()
red:get(prev)
red:incr(cur)
red:expire(cur, 120)
local res, err = red:commit_pipeline()
red:set_keepalive(60000, 64)
if not res then return ngx.exit(500) end
local p = tonumber(res[1]) or 0
local c = tonumber(res[2]) or 0
local rate = p * ((60 - now % 60) / 60) + c
if rate > limit then return ngx.exit(429) end
"""

# FLOOR_DENY_LUA answers what the deny cache answers, from constants.
FLOOR_DENY_LUA = r"""
local h = ngx.header
h["RateLimit-Policy"] = '"100r/m";q=100;w=60'
h["RateLimit"] = '"100r/m";r=0;t=42'
h["Retry-After"] = "42"
local body = '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded","status":429,"detail":"the rate limit is exceeded; retry after 42 s","violated-policies":["100r/m"]}\n'
ngx.status = 429
h["Content-Type"] = "application/problem+json"
h["Cache-Control"] = "no-store"
h["Content-Length"] = #body
h["X-Content-Type-Options"] = "nosniff"
ngx.print(body)
return ngx.exit(429)
"""

WRK_LUA = r"""
local n = tonumber(os.getenv("TOKENS"))
local path = os.getenv("WRK_PATH")
math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)"), 16) or 0))
request = function()
  return wrk.format(nil, path .. "?token=t" .. math.random(1, n))
end
-- -rate: each connection waits a think time of THINK_MS on average
-- before its next request (wrk takes whole ms: the floor or the ceiling,
-- drawn to that mean), so every front is offered the same load.
local think = tonumber(os.getenv("THINK_MS") or "")
if think then
  local lo = math.floor(think)
  delay = function() return lo + (math.random() < think - lo and 1 or 0) end
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %d %d\n", summary.requests, summary.duration,
    latency:percentile(99), summary.errors.status))
end
"""


def drive(port, path, tokens, n, conc=16):
    """Sends n GET requests (random tokens, fixed seed) over conc keep-alive connections."""
    import http.client, random, threading
    rnd = random.Random(42)
    reqs = [f"{path}?token=t{rnd.randint(1, tokens)}" for _ in range(n)]
    codes = {}
    lock = threading.Lock()

    def worker(i):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for k in range(i, n, conc):
            c.request("GET", reqs[k])
            r = c.getresponse()
            r.read()
            with lock:
                codes[r.status] = codes.get(r.status, 0) + 1
        c.close()

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(conc)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return codes


def print_stats(port):
    """Prints the async limiter's counters of each worker (one per new
    connection until every worker has answered, 50 tries at most)."""
    import http.client
    seen = {}
    for _ in range(50):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/_stats")
        line = c.getresponse().read().decode().strip()
        c.close()
        seen[line.split()[0]] = line
        if len(seen) == 2:
            break
    for line in sorted(seen.values()):
        print("async stats:", line)


def fs_label(args):
    return "defaults" if args.first_sight is None else f"first_sight {args.first_sight}"


def callgrind(args, d, nginx, conf, port, rport):
    """Instructions (callgrind's Ir, user space) per request of one nginx
    worker: two runs of n1 and n2 requests from a fresh start and an empty
    Redis, the difference divided by n2 - n1 (startup cancels out). Under
    valgrind the timeouts are 5 s, and the module's limits are per hour so
    that a run crossing a minute does not expire the cached denials; the
    seed keeps its minutes. With 100,000 tokens nearly every request of the
    async row is a first sight."""
    vconf = (conf.replace("daemon off;", "daemon off;\nmaster_process off;")
             .replace("worker_processes 2;", "worker_processes 1;")
             .replace('breaker = "sluice_breaker"', 'breaker = "sluice_breaker", timeout = 5000')
             .replace("red:set_timeout(50)", "red:set_timeout(5000)")
             .replace('limits = "100r/m"', 'limits = "100r/h"'))
    with open(os.path.join(d, "vg.conf"), "w") as f:
        f.write(vconf)
    n1, n2 = (int(x) for x in args.cg_n.split(","))
    print("callgrind: user-space instructions per request of one nginx worker, "
          f"({n2} - {n1} requests), 16 connections")
    print("| front | tokens | Ir/request | statuses |")
    print("|---|---|---:|---|")
    fronts = (("seed", "/seed", 100000), ("module sync", "/sync", 100000),
              (f"module async, {fs_label(args)}", "/async", 100000),
              ("module sync", "/sync", 1000), (f"module async, {fs_label(args)}", "/async", 1000),
              ("seed", "/seed", 10), ("module deny cache", "/deny", 10),
              ("floor: proxy_pass, no Lua", "/floorproxy", 100000), ("floor: return 429, no Lua", "/floor429", 10),
              ("floor: access_by_lua ngx.exit(429)", "/floorlua429", 10),
              ("floor: access_by_lua, a constant denial as the module's", "/floorluadeny", 10))
    only = args.cg_fronts.split(",") if args.cg_fronts else None
    for name, path, tokens in fronts:
        if only and path.strip("/") not in only and f"{path.strip('/')}:{tokens}" not in only:
            continue
        ir = []
        for n in (n1, n2):
            subprocess.run(["redis-cli", "-p", str(rport), "flushall"], check=True, capture_output=True)
            out = os.path.join(d, "cg.out")
            vg = subprocess.Popen(["valgrind", "--tool=callgrind", "--smc-check=all-non-file",
                                   f"--callgrind-out-file={out}", nginx, "-p", d + "/", "-c",
                                   os.path.join(d, "vg.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_port(port, 120)
            codes = drive(port, path, tokens, n)
            vg.send_signal(signal.SIGQUIT)
            vg.wait(120)
            with open(out) as f:
                ir.append(int(re.search(r"summary: (\d+)", f.read()).group(1)))
            if args.cg_keep:
                shutil.copy(out, os.path.join(args.cg_keep, f"{path.strip('/')}-{tokens}-{n}.out"))
        print(f"| {name} | {tokens} | {(ir[1] - ir[0]) / (n2 - n1):,.0f} | {codes} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-rounds", type=int, default=5)
    ap.add_argument("-d", type=int, default=5, help="seconds per round")
    ap.add_argument("-rows", default="sync,async,hot")
    ap.add_argument("-c", type=int, default=64)
    ap.add_argument("-fresh", action="store_true",
                    help="new nginx workers (a reload) and a new sluice serve before each front's round, warmed for a second")
    ap.add_argument("-rate", type=float, default=0,
                    help="offer about this many requests/s to every front (a think time per connection) instead of as many as each can take")
    ap.add_argument("-callgrind", action="store_true",
                    help="instead of wrk rounds: user-space instructions per request of one nginx worker "
                         "under valgrind (seed, module sync, async, deny cache, and the floors), load-independent")
    ap.add_argument("-cg-fronts", dest="cg_fronts", default="",
                    help="with -callgrind, only these paths, or path:tokens (comma-separated, e.g. deny,floor429,async:100000)")
    ap.add_argument("-cg-keep", dest="cg_keep", default="",
                    help="with -callgrind, copy callgrind's output files to this directory (for callgrind_annotate)")
    ap.add_argument("-cg-n", dest="cg_n", default="3000,9000",
                    help="with -callgrind, the requests of the two runs whose difference is counted")
    ap.add_argument("-floor", action="store_true",
                    help="add the floor to each row: nginx with no Lua, proxy_pass (sync, async) or return 429 (hot)")
    ap.add_argument("-before", default="",
                    help="a directory holding another version's openresty/lib (git archive COMMIT openresty/lib | tar -x -C DIR): "
                         "the async row also runs the module async from it, side by side")
    ap.add_argument("-sluice-before", dest="sluice_before", default="",
                    help="a sluice binary of another version (go build -o BIN ./cmd/sluice in its checkout): the async and "
                         "async1k rows also run auth_request to its async zone (front authasyncbefore), side by side")
    ap.add_argument("-fronts", default="",
                    help="only these fronts of each row, by path (comma-separated, e.g. sync,async,asyncbefore); the seed always runs")
    ap.add_argument("-vs", default="",
                    help="also print, per front, its per-round ratios of requests/s and p99 to this front's of the same round (a path, e.g. sync)")
    ap.add_argument("-stats", action="store_true",
                    help="after each row, print the async limiter's counters of each worker of the async front")
    ap.add_argument("-first-sight", dest="first_sight", type=int, default=None,
                    help="the module's async first_sight (0: a key's first check asks Redis; default: the module's)")
    args = ap.parse_args()
    for tool in ("wrk", "redis-server", "go") + (("valgrind", "redis-cli") if args.callgrind else ()):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    d = tempfile.mkdtemp(prefix="sluice-openresty-bench-")
    procs = []

    def spawn(cmd, **kw):
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, os.path.basename(cmd[0]) + ".log"), "a"), **kw)
        procs.append(p)
        return p

    try:
        subprocess.run(["go", "build", "-o", os.path.join(d, "sluice"), "./cmd/sluice"], cwd=ROOT, check=True)
        rport, up_port, front_port, api_port, api_async_port, api_before_port = (free_port() for _ in range(6))
        redis = spawn(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        wait_port(rport)
        serves = []
        serving = [("sync", api_port, "sync"), ("async", api_async_port, "async")]
        if args.sluice_before:
            serving.append(("asyncbefore", api_before_port, "async"))
        for name, port, mode in serving:
            # The async zone gets the module's first_sight too: like for like.
            extra = f", first_sight: {args.first_sight}" if mode == "async" and args.first_sight else ""
            with open(os.path.join(d, name + ".yaml"), "w") as f:
                f.write(f"""store: {{url: "redis://127.0.0.1:{rport}"}}
log: {{level: warn}}
listeners: [{{addr: "127.0.0.1:{port}", serve: api}}]
zones:
  - {{name: bench-{name}, limits: "100r/m", key: "query:token", mode: {mode}{extra}}}
""")
            binary = os.path.abspath(args.sluice_before) if name == "asyncbefore" else os.path.join(d, "sluice")
            serves.append(spawn([binary, "serve", "-config", os.path.join(d, name + ".yaml")]))
        for _, p, _ in serving:
            wait_port(p)
        # The auth_request fronts' sluice serve, by front: its index in
        # serves, its command and its port (-fresh starts it anew).
        serve_of = {"/auth": 0, "/authasync": 1, "/authasyncbefore": 2}
        serve_cmd = [(p.args, port) for p, (_, port, _) in zip(serves, serving)]
        seed = SEED_LUA.replace("REDIS_PORT", str(rport))
        fs_opt = "" if args.first_sight is None else f", first_sight = {args.first_sight}"
        fs_name = fs_label(args)
        lib = os.path.join(ROOT, "openresty", "lib")
        conf = f"""
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
daemon off;
worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {d}/cb; proxy_temp_path {d}/px; fastcgi_temp_path {d}/fc; uwsgi_temp_path {d}/uw; scgi_temp_path {d}/sc;
    lua_package_path "{lib}/?.lua;/usr/share/lua/5.1/?.lua;;";
    lua_socket_log_errors off;
    lua_shared_dict sluice_breaker 64k;
    lua_shared_dict sluice_deny 16m;
    init_by_lua_block {{
        local sluice = require "sluice"
        sluice.define("sync", {{ redis = "redis://127.0.0.1:{rport}", breaker = "sluice_breaker" }})
        sluice.define("async", {{ redis = "redis://127.0.0.1:{rport}", breaker = "sluice_breaker", async = true{fs_opt} }})
        sluice.define("deny", {{ redis = "redis://127.0.0.1:{rport}", breaker = "sluice_breaker", deny_cache = "sluice_deny" }})
    }}
    upstream app {{ server 127.0.0.1:{up_port}; keepalive 64; }}
    upstream sync_api {{ server 127.0.0.1:{api_port}; keepalive 64; }}
    upstream async_api {{ server 127.0.0.1:{api_async_port}; keepalive 64; }}
    upstream before_api {{ server 127.0.0.1:{api_before_port}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{front_port} reuseport backlog=4096;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        location /seed {{ access_by_lua_block {{ {seed} }} proxy_pass http://app; }}
        location /sync {{ access_by_lua_block {{ require("sluice").limiter("sync"):access{{ zone = "bench", key = ngx.var.arg_token, limits = "100r/m" }} }} proxy_pass http://app; }}
        location /async {{ access_by_lua_block {{ require("sluice").limiter("async"):access{{ zone = "bench", key = ngx.var.arg_token, limits = "100r/m" }} }} proxy_pass http://app; }}
        location /asyncbefore {{ access_by_lua_block {{ require("sluice").limiter("async"):access{{ zone = "bench", key = ngx.var.arg_token, limits = "100r/m" }} }} proxy_pass http://app; }}
        location /deny {{ access_by_lua_block {{ require("sluice").limiter("deny"):access{{ zone = "bench", key = ngx.var.arg_token, limits = "100r/m" }} }} proxy_pass http://app; }}
        location /auth {{ auth_request /_sync; error_page 403 = @denied; proxy_pass http://app; }}
        location /authasync {{ auth_request /_async; error_page 403 = @denied; proxy_pass http://app; }}
        location /authasyncbefore {{ auth_request /_before; error_page 403 = @denied; proxy_pass http://app; }}
        location = /_sync {{ internal; proxy_pass http://sync_api/v1/auth?zone=bench-sync; proxy_pass_request_body off; proxy_set_header Content-Length ""; proxy_set_header X-Original-URI $request_uri; }}
        location = /_async {{ internal; proxy_pass http://async_api/v1/auth?zone=bench-async; proxy_pass_request_body off; proxy_set_header Content-Length ""; proxy_set_header X-Original-URI $request_uri; }}
        location = /_before {{ internal; proxy_pass http://before_api/v1/auth?zone=bench-asyncbefore; proxy_pass_request_body off; proxy_set_header Content-Length ""; proxy_set_header X-Original-URI $request_uri; }}
        location @denied {{ return 429; }}
        # The floor: what nginx costs with no Lua at all, a 429 from the
        # front, or a plain proxy_pass to the same upstream.
        location /floor429 {{ return 429; }}
        location /floorproxy {{ proxy_pass http://app; }}
        # The Lua floor: access_by_lua that only exits, and one that answers
        # a constant denial with the module's headers and body.
        location /floorlua429 {{ access_by_lua_block {{ return ngx.exit(429) }} }}
        location /floorluadeny {{ access_by_lua_block {{ {FLOOR_DENY_LUA} }} }}
        # -stats: the async limiter's counters in the worker that answers.
        location = /_stats {{ content_by_lua_block {{
            local a = require("sluice").limiter("async").edge.async
            local t = {{ "views=" .. a.nkeys + a.nold, "queued=" .. a.qtail - a.qhead + 1, "bytes=" .. a.nbytes }}
            for k, v in pairs(a.stats) do t[#t + 1] = k .. "=" .. v end
            table.sort(t)
            ngx.say("pid=", ngx.worker.pid(), " ", table.concat(t, " "))
        }} }}
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
        if args.callgrind:
            wait_port(up_port)
            return callgrind(args, d, nginx, conf, front_port, rport)
        wait_port(up_port)
        with open(os.path.join(d, "wrk.lua"), "w") as f:
            f.write(WRK_LUA)

        rows = {
            "sync": (100000, [("seed", "/seed", []), ("module sync", "/sync", []), ("auth_request sync", "/auth", [serves[0].pid])]),
            "async": (100000, [("seed", "/seed", []), ("module sync", "/sync", []), (f"module async, {fs_name}", "/async", []),
                               ("auth_request sync", "/auth", [serves[0].pid]), ("auth_request async", "/authasync", [serves[1].pid])]),
            "async1k": (1000, [("seed", "/seed", []), ("module sync", "/sync", []), (f"module async, {fs_name}", "/async", []),
                               ("auth_request sync", "/auth", [serves[0].pid]), ("auth_request async", "/authasync", [serves[1].pid])]),
            "hot": (10, [("seed", "/seed", []), ("module deny cache", "/deny", []), ("auth_request sync", "/auth", [serves[0].pid])]),
        }

        if args.before:
            for row in ("async", "async1k"):
                rows[row][1].insert(3, ("module async, before (-before)", "/asyncbefore", []))
        if args.sluice_before:
            for row in ("async", "async1k"):
                rows[row][1].append(("auth_request async, before (-sluice-before)", "/authasyncbefore", [serves[2].pid]))
        if args.floor:
            for row in ("sync", "async"):
                rows[row][1].append(("floor: proxy_pass, no Lua", "/floorproxy", []))
            # async1k's tokens are mostly over their limits: its floor is
            # a denial, as the hot row's.
            for row in ("hot", "async1k"):
                rows[row][1].append(("floor: return 429, no Lua", "/floor429", []))
                rows[row][1].append(("floor: Lua, a constant denial as the module's", "/floorluadeny", []))
        if args.fronts:
            keep = set(args.fronts.split(",")) | {"seed"}
            for row in rows:
                rows[row] = (rows[row][0], [f for f in rows[row][1] if f[1].strip("/") in keep])
        # Each front in an nginx of its own (the same configuration, its
        # own port): no front's state (coroutines, pools, the Lua heap)
        # touches another's, and its CPU is its own workers'.
        fronts_of = {}
        for row in args.rows.split(","):
            for _, path, _ in rows[row][1]:
                if path in fronts_of:
                    continue
                port, tag = free_port(), path.strip("/")
                text = conf
                if path == "/asyncbefore":
                    text = text.replace(f'"{lib}/?.lua;', f'"{os.path.join(os.path.abspath(args.before), "openresty", "lib")}/?.lua;')
                # Each front counts on keys of its own (a zone named for
                # it), so that what it admitted compares with the others.
                text = text.replace('zone = "bench"', f'zone = "bench-{tag}"')
                text = (text.replace(f"127.0.0.1:{front_port} ", f"127.0.0.1:{port} ")
                        .replace(f"{d}/nginx.pid", f"{d}/nginx-{tag}.pid").replace(f"{d}/error.log", f"{d}/error-{tag}.log"))
                with open(os.path.join(d, f"front-{tag}.conf"), "w") as f:
                    f.write(text)
                proc = spawn([nginx, "-p", d + "/", "-c", os.path.join(d, f"front-{tag}.conf")])
                fronts_of[path] = (port, proc)
        time.sleep(0.5)
        for path, (port, proc) in list(fronts_of.items()):
            wait_port(port)
        time.sleep(0.5)
        masters = {path: proc.pid for path, (port, proc) in fronts_of.items()}
        fronts_of = {path: (port, children(proc.pid)) for path, (port, proc) in fronts_of.items()}

        def fresh(path, tokens, env):
            # New workers (nginx reloads on SIGHUP): a Lua VM, heap and
            # JIT traces of their own, warmed for a second, so that no
            # front keeps one start's traces through every round.
            port, old = fronts_of[path]
            os.kill(masters[path], signal.SIGHUP)
            deadline = time.time() + 10
            while time.time() < deadline:
                now = children(masters[path])
                if len(now) == 2 and not set(now) & set(old):
                    break
                time.sleep(0.05)
            else:
                sys.exit(f"{path}: the reloaded nginx did not replace its workers")
            fronts_of[path] = (port, now)
            if path in serve_of:
                # And a new sluice serve: a process's heap, goroutines and
                # pools of its own, not one start's through every round.
                k = serve_of[path]
                cmd, sport = serve_cmd[k]
                serves[k].terminate()
                serves[k].wait(timeout=30)
                serves[k] = spawn(cmd)
                wait_port(sport)
            subprocess.run(["wrk", "-t2", f"-c{args.c}", "-d1s", "-s", os.path.join(d, "wrk.lua"),
                            f"http://127.0.0.1:{port}"], env=env, capture_output=True, check=True)

        def run(path, tokens, secs, extra, warm=False):
            env = dict(os.environ, TOKENS=str(tokens), WRK_PATH=path)
            if args.rate:
                # c connections, each a request per think time (plus its
                # latency, small beside it): about -rate requests/s.
                env["THINK_MS"] = str(args.c * 1000 / args.rate)
            if args.fresh and not warm:
                fresh(path, tokens, env)
            front_port, workers = fronts_of[path]
            fpids = workers + ([serves[serve_of[path]].pid] if path in serve_of else extra)
            c0, r0 = cpu_ticks(fpids), cpu_ticks([redis.pid])
            out = subprocess.run(["wrk", "-t2", f"-c{args.c}", f"-d{secs}s", "-s", os.path.join(d, "wrk.lua"),
                                  f"http://127.0.0.1:{front_port}"], env=env, capture_output=True, text=True, check=True).stdout
            c1, r1 = cpu_ticks(fpids), cpu_ticks([redis.pid])
            m = re.search(r"RESULT (\d+) (\d+) (\d+) (\d+)", out)
            n, dur, p99, non2xx = (int(x) for x in m.groups())
            us = 1e6 / TICK
            return {"rps": n / (dur / 1e6), "p99": p99, "cpu": (c1 - c0) * us / n, "redis": (r1 - r0) * us / n, "non2xx": non2xx / n}

        print("load average before:", open("/proc/loadavg").read().strip())
        load = f", about {args.rate:,.0f} requests/s offered" if args.rate else ""
        print(f"wrk -t2 -c{args.c}{load}, {args.rounds} interleaved rounds of {args.d}s per front, after a warm-up round each")
        for row in args.rows.split(","):
            tokens, fronts = rows[row]
            for _, path, extra in fronts:
                run(path, tokens, 2, extra, warm=True)
            res = {name: [] for name, _, _ in fronts}
            for r in range(args.rounds):
                # Each round starts one front later: no front always runs
                # right after another (Redis keys shared with the previous
                # front, a CPU still busy with its connections).
                k = r % len(fronts)
                for name, path, extra in fronts[k:] + fronts[:k]:
                    res[name].append(run(path, tokens, args.d, extra))
            seed = res["seed"]
            print(f"\n### {row}: {tokens} tokens\n")
            print("| front | requests/s (median) | vs seed, per round | p99 ms (median) | non-2xx | 2xx/s (median) | CPU/request, front | CPU/request, Redis |")
            print("|---|---|---|---|---|---|---|---|")
            for name, _, _ in fronts:
                r = res[name]
                ratios = sorted(x["rps"] / s["rps"] for x, s in zip(r, seed))
                med = lambda k: statistics.median(x[k] for x in r)
                print(f"| {name} | {med('rps'):,.0f} | {statistics.median(ratios):.2f}x ({ratios[0]:.2f}–{ratios[-1]:.2f}) | "
                      f"{med('p99') / 1000:.2f} | {med('non2xx') * 100:.0f}% | {statistics.median(x['rps'] * (1 - x['non2xx']) for x in r):,.0f} | "
                      f"{med('cpu'):.0f} µs | {med('redis'):.1f} µs |")
            # Each auth_request front against the sync zone of the same rounds.
            if "auth_request sync" in res:
                base = res["auth_request sync"]
                for name, path, _ in fronts:
                    if path.startswith("/authasync"):
                        rps = sorted(x["rps"] / b["rps"] for x, b in zip(res[name], base))
                        p99 = sorted(x["p99"] / b["p99"] for x, b in zip(res[name], base))
                        print(f"\n{name} / auth_request sync, per round: requests/s {statistics.median(rps):.2f}x ({rps[0]:.2f}–{rps[-1]:.2f}), "
                              f"p99 {statistics.median(p99):.2f}x ({p99[0]:.2f}–{p99[-1]:.2f})")
            base = next((name for name, path, _ in fronts if path.strip("/") == args.vs), None)
            if base:
                print(f"\nper round, against {base}: requests/s ratio, p99 ratio (min–median–max)\n")
                for name, _, _ in fronts:
                    if name == base:
                        continue
                    rr = sorted(x["rps"] / b["rps"] for x, b in zip(res[name], res[base]))
                    pr = sorted(x["p99"] / b["p99"] for x, b in zip(res[name], res[base]))
                    print(f"- {name}: requests/s {rr[0]:.2f}–{statistics.median(rr):.2f}–{rr[-1]:.2f}x, "
                          f"p99 {pr[0]:.2f}–{statistics.median(pr):.2f}–{pr[-1]:.2f}x")
            if args.stats and "/async" in fronts_of:
                print_stats(fronts_of["/async"][0])
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
