#!/usr/bin/env python3
"""bench/schedlat.py: how long goroutines waited for a processor after being
readied (Waiting->Runnable until Runnable->Running), per role, from a runtime
trace. A goroutine's role is the first frame of the sluice, rueidis or testing
code where it last blocked; "woken by netpoll/sysmon" means readied without a
goroutine (the network poller), as a Redis client's reader is when a reply
arrives. Used for the deny cache's yield (docs/failure.md, "Callers that spin on hits"):

  cd edge && go test -c -o /tmp/edge.test . &&
  /tmp/edge.test -test.run '^$' -test.bench 'HotKeys$/denycache' -test.benchtime 2s -test.trace /tmp/t.out &&
  go tool trace -d=parsed /tmp/t.out > /tmp/t.txt && python3 ../bench/schedlat.py /tmp/t.txt
"""
import re, sys, collections
role = {}            # goid -> role
ready = {}           # goid -> (time, waker)
lat = collections.defaultdict(list)  # (role, waker kind) -> [ns]
cur = None
ev = re.compile(r'^M=\S+ P=(\S+) G=(\S+) StateTransition Time=(\d+) GoID=(\d+) (\w+)->(\w+)')
pending_role = None
def frame_role(frames):
    for f in frames:
        if any(s in f for s in ("rueidis", "redisstore", "DenyCache", "runCallers", "edge.", "testing.")):
            return f.split(" @")[0].strip()
    return frames[0].split(" @")[0].strip() if frames else "?"
stackfor = None; frames = []
for line in open(sys.argv[1]):
    if stackfor is not None:
        if line.startswith("\t") and not line.startswith("\t\t"):
            frames.append(line.strip()); continue
        if line.startswith("\t\t"):
            continue
        role[stackfor] = frame_role(frames); stackfor = None; frames = []
    m = ev.match(line)
    if not m:
        if line.startswith("TransitionStack=") and cur is not None:
            stackfor = cur
        continue
    p, g, t, goid, fr, to = m.groups()
    t = int(t); goid = int(goid); cur = None
    if fr == "Running" and to == "Waiting":
        cur = goid
    elif to == "Runnable" and fr == "Waiting":
        ready[goid] = (t, "netpoll/sysmon(G=-1)" if g == "-1" else "goroutine")
    elif fr == "Runnable" and to == "Running" and goid in ready:
        t0, w = ready.pop(goid)
        lat[(role.get(goid, "?"), w)].append(t - t0)
rows = []
for k, v in lat.items():
    v.sort(); n = len(v)
    rows.append((max(v), k, n, v[n//2], v[int(n*.99)], sum(x > 10e6 for x in v), sum(x > 40e6 for x in v)))
rows.sort(reverse=True)
print("role | woken by | n | p50 ms | p99 ms | max ms | >10ms | >40ms")
for mx, k, n, p50, p99, a, b in rows[:25]:
    print(f"{k[0]} | {k[1]} | {n} | {p50/1e6:.3f} | {p99/1e6:.3f} | {mx/1e6:.1f} | {a} | {b}")
