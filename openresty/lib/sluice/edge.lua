-- sluice.edge: what decides in front of Redis, in the workers' shared
-- memory: the failure policy and a breaker shared by the workers
-- (lua_shared_dict), and the deny cache. It follows package edge of the Go
-- module (edge/doc.go): same policy, same breaker, same deny cache rule.
local limits = require "sluice.limits"

local ffi = require "ffi"

local format, concat, max, min, random, floor = string.format, table.concat, math.max, math.min, math.random, math.floor
local keys = require "sluice.keys"
local itoa = keys.itoa
local shared = ngx.shared

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } sluice_timespec;
int clock_gettime(int clk_id, sluice_timespec *tp);
]]
local ts = ffi.new("sluice_timespec")

-- clock returns the time of day in s, to the µs: what ngx.update_time()
-- and ngx.now() give to the ms, without nginx formatting its cached time
-- strings on every call (the deny cache reads it for every request).
local function clock()
  ffi.C.clock_gettime(0, ts) -- CLOCK_REALTIME
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local _M = {}
local mt = { __index = _M }

-- Defaults of the breaker (edge.BreakerOptions) and the deny cache.
_M.BREAKER_FAILURES = 5
_M.BREAKER_BACKOFF = 0.5 -- s
_M.BREAKER_MAX_BACKOFF = 5 -- s
_M.DENY_CACHE_MAX_AGE = 60 -- s
-- FAIL_CLOSED_RETRY_AFTER is the RetryAfter of a fail-closed denial, µs.
_M.FAIL_CLOSED_RETRY_AFTER = 1000000

local function dict(name, what)
  if name == nil then return nil end
  local d = shared[name]
  if not d then
    return nil, limits.INVALID .. format("%s: no lua_shared_dict %q", what, tostring(name))
  end
  return d
end

-- new returns the edge of limiter lim; opts as sluice.new takes them.
function _M.new(lim, opts)
  local self = setmetatable({ lim = lim, policy = lim.policy }, mt)
  local err
  self.breaker, err = dict(opts.breaker, "breaker")
  if err then return nil, err end
  self.deny, err = dict(opts.deny_cache, "deny_cache")
  if err then return nil, err end
  self.failures = opts.breaker_failures or _M.BREAKER_FAILURES
  self.backoff = (opts.breaker_backoff or _M.BREAKER_BACKOFF * 1000) / 1000
  self.max_backoff = (opts.breaker_max_backoff or _M.BREAKER_MAX_BACKOFF * 1000) / 1000
  self.max_age = (opts.deny_cache_max_age or _M.DENY_CACHE_MAX_AGE * 1000) / 1000
  self.ns = lim.prefix .. "|" .. lim.client.name .. "|" -- one dict may serve several limiters
  self.epoch_key = self.ns .. "epoch"
  -- The breakers' keys, made once per scope: admit and report run for
  -- every call.
  self.global = { f = self.ns .. "f", u = self.ns .. "u", b = self.ns .. "b", p = self.ns .. "p", wave = 0 }
  self.scopes = {}
  self.memo, self.nmemo = {}, 0
  -- bad_states counts, per worker, the checks decided by the policy
  -- because their keys hold data that is not sluice's.
  self.bad_states = 0
  if opts.async then
    self.async, err = require("sluice.async").new(lim, self, opts)
    if not self.async then return nil, limits.INVALID .. err end
  end
  return self
end

-- degraded is the decision of the failure policy; bad_state marks one
-- taken because the check's keys hold data that is not sluice's.
function _M.degraded(self, bad_state)
  if self.policy == "closed" then
    return { allowed = false, shadowed = false, source = "fail-closed", hits = {},
      retry_after = _M.FAIL_CLOSED_RETRY_AFTER, bad_state = bad_state }
  end
  return { allowed = true, shadowed = false, source = "fail-open", hits = {}, retry_after = 0, bad_state = bad_state }
end

-- log_line writes a log line of the module; in a request it does so from
-- a timer, out of the request's context: nginx adds the request line
-- (with its query, which may hold the key) to every line logged in one.
local function write_line(premature, level, msg)
  ngx.log(level, msg)
end

local function log_line(level, ...)
  local parts = { ... }
  for i = 1, select("#", ...) do parts[i] = tostring(parts[i]) end
  local msg = concat(parts)
  if ngx.get_phase() == "timer" or not ngx.timer.at(0, write_line, level, msg) then
    ngx.log(level, msg)
  end
end
_M.log_line = log_line

-- Breaker, in the shared dict: "f" consecutive failures, "u" open until
-- (s), "b" the current back-off (s), "p" a probe under way. Outside a
-- Cluster there is one breaker per limiter; in a Cluster one per node
-- (the master that owns the check's first hash slot in the worker's slot
-- map), so that a failing master's keys are decided by the policy while
-- every other master's are still decided by Redis. A scope holds one
-- breaker's dict keys and, for a node, its address (for the log).

-- scope returns the breaker scope of node (an address; nil: the limiter's).
local function scope(self, node)
  if not node then return self.global end
  local sc = self.scopes[node]
  if not sc then
    local ns = self.ns .. "node|" .. node .. "|"
    sc = { f = ns .. "f", u = ns .. "u", b = ns .. "b", p = ns .. "p", node = node, wave = 0 }
    self.scopes[node] = sc
  end
  return sc
end

-- admit reports whether a store call may be made now in scope sc, and
-- whether it is the probe.
local function admit(self, sc)
  local b = self.breaker
  if not b then return true end
  local untl = b:get(sc.u)
  if not untl then return true end
  ngx.update_time()
  if ngx.now() < untl then return false end
  -- One probe for every worker: add fails while another is under way.
  local ok = b:add(sc.p, true, self.lim.timeout / 1000 * 4 + 1)
  return ok, true
end

-- release ends a probe that neither succeeded nor failed (a check that
-- failed on its keys' data: Redis answered, the breaker learns nothing),
-- so that the next check may probe.
local function release(self, sc, probe)
  if probe then self.breaker:delete(sc.p) end
end

-- report tells the breaker how a Redis call in scope sc went; wave is the
-- scope's wave as the call began. Calls in flight together in a worker
-- fail together (a batch that timed out, a node that stalled for a
-- moment): only the first of them to report counts, so that the breaker
-- counts failed calls one after another, not the requests that shared
-- one failure (as edge.Breaker does); each worker counts its own waves.
local function report(self, sc, ok, probe, wave)
  local b = self.breaker
  if not b then return end
  if ok then
    -- "u" (open) is only ever set while "f" counts failures: one read
    -- tells a success that there is nothing to close.
    if b:get(sc.f) or probe then
      b:delete(sc.f)
      b:delete(sc.u)
      b:delete(sc.b)
      b:delete(sc.p)
      log_line(ngx.NOTICE, "sluice: breaker closed", sc.node and (" for Cluster node " .. sc.node) or "",
        ": Redis answers again")
    end
    return
  end
  if not probe and wave ~= sc.wave then return end
  sc.wave = sc.wave + 1
  local f = b:incr(sc.f, 1, 0)
  if probe or (f and f >= self.failures and not b:get(sc.u)) then
    local back = b:get(sc.b)
    back = back and min(back * 2, self.max_backoff) or self.backoff
    b:set(sc.b, back)
    ngx.update_time()
    b:set(sc.u, ngx.now() + back * (1 - random() / 4))
    b:delete(sc.p)
    log_line(ngx.WARN, "sluice: breaker open", sc.node and (" for Cluster node " .. sc.node) or "",
      " for ", back, " s after ", f, " failed Redis calls")
  end
end

-- Deny cache: a denial stored under a compact key of the check's
-- identity, in binary: the epoch and times, then each hit's result.
--
-- The key is "d", 10 bytes of SHA-1 of everything that identifies the
-- check but its key (limiter, cost, group, shadow flag, zone, limits), and
-- the key itself when it is short ("=" and at most SHORT_KEY bytes), else
-- "#" and its SHA-1: at most 60 bytes whatever the key. access computes
-- the prefix once per location (deny_prefix), so a cached denial costs a
-- concatenation and two dict reads, no digest. A check whose hits differ
-- in zone or key is keyed "D" and the SHA-1 of all of it.

local SHORT_KEY = 48
_M.SHORT_KEY = SHORT_KEY

-- describe returns the identity of a check but its key; zone nil for hits
-- that differ in zone or key (each hit's zone and key then described).
local function describe(ns, cost, group, shadow, zone, hits, limits_only)
  local parts = { ns, itoa(cost), #(group or "") .. ":" .. (group or ""), shadow and "1" or "0" }
  if zone then parts[#parts + 1] = #zone .. ":" .. zone end
  for i = 1, #hits do
    local h = hits[i]
    local l = limits_only and h or h.limit
    local p = l.code .. itoa(l.rate) .. "/" .. itoa(l.window) .. "/" .. itoa(l.bucket) .. "/" .. (l.shadow and 1 or 0)
    if not zone then p = #h.zone .. ":" .. h.zone .. "|" .. #h.key .. ":" .. h.key .. "|" .. p end
    parts[#parts + 1] = p
  end
  return concat(parts, "|")
end

-- deny_prefix returns the start of the deny cache key of the checks of
-- limits ls (validated) on a key of zone, at cost, with group and shadow.
function _M.deny_prefix(self, cost, group, shadow, zone, ls)
  return "d" .. ngx.sha1_bin(describe(self.ns, cost, group, shadow, zone, ls, true)):sub(1, 10)
end

-- deny_key is the end of a deny cache key: the key, or its digest.
local function deny_key(key)
  if #key <= SHORT_KEY then return "=" .. key end
  return "#" .. ngx.sha1_bin(key)
end
_M.deny_key = deny_key

-- fingerprint returns the deny cache key of c (valid), at cost when given
-- (the async views' identity: cost 1 whatever the check's).
local function fingerprint(self, c, cost)
  cost = cost or c.cost
  local hits = c.hits
  local zone, key = hits[1].zone, hits[1].key
  for i = 2, #hits do
    if hits[i].zone ~= zone or hits[i].key ~= key then
      return "D" .. ngx.sha1_bin(describe(self.ns, cost, c.group, c.shadow, nil, hits))
    end
  end
  local ls = {}
  for i = 1, #hits do ls[i] = hits[i].limit end
  return self:deny_prefix(cost, c.group, c.shadow, zone, ls) .. deny_key(key)
end
_M.fingerprint = fingerprint

-- hold returns how long (s) a denial may be repeated: RetryAfter for log
-- and gcra, whose RetryAfter is exact; 1% and a µs less for the
-- estimators, whose RetryAfter is tight to 1%.
local function hold(c, d)
  local h = d.retry_after / 1e6
  for i, hit in ipairs(c.hits) do
    local code = hit.limit.code
    if not d.hits[i].allowed and (code == "w" or code == "b" or code == "d") then
      h = (d.retry_after * 0.99 - 1) / 1e6
      break
    end
  end
  return h
end

-- The value: HEAD doubles (epoch, sent and until in s), then PER_HIT per
-- hit (flags: 1 allowed, 2 shadow; used, remaining, retry_after and
-- reset_after in µs), read in place through the FFI.
local HEAD, PER_HIT = 3, 5
local DOUBLES = ffi.typeof("const double *")
local buf = ffi.new("double[?]", HEAD + PER_HIT * limits.MAX_HITS)

-- cached returns the denial kept under id while it certainly holds, its
-- waits counted down, or nil.
function _M.cached(self, id)
  local deny = self.deny
  local v = deny:get(id)
  if not v then return nil end
  local n = (#v / 8 - HEAD) / PER_HIT
  if n < 1 or n ~= floor(n) then return nil end
  local p = ffi.cast(DOUBLES, v)
  if p[0] ~= (deny:get(self.epoch_key) or 0) then return nil end
  local now = clock()
  -- A denial is repeated only while more than 1 ms of it is left: the
  -- margin the cache kept when nginx's clock (whole ms) was read here.
  if now + 0.001 >= p[2] then return nil end
  local elapsed = (now - p[1]) * 1e6
  local hits = {}
  local d = { source = "deny-cache", allowed = true, shadowed = false, retry_after = 0, hits = hits }
  for i = 1, n do
    local k = HEAD + (i - 1) * PER_HIT
    local f = p[k]
    local allowed, shadow = f == 1 or f == 3, f >= 2
    local retry = max(0, p[k + 3] - elapsed)
    hits[i] = { allowed = allowed, shadow = shadow, used = p[k + 1], remaining = p[k + 2],
      retry_after = retry, reset_after = max(0, p[k + 4] - elapsed) }
    if not allowed then
      if shadow then
        d.shadowed = true
      else
        d.denier = d.denier or i
        d.allowed = false
        if retry > d.retry_after then d.retry_after = retry end
      end
    end
  end
  if d.allowed then return nil end
  if d.retry_after < 1 then d.retry_after = 1 end
  return d, p[2], p[0], now
end

-- The memo: a worker's copy of the cached denials of one-limit access
-- sites, so that a hot key denied again and again costs one dict read (the
-- epoch, a number) and a clock read, not the value's string, its decoding
-- and the answer's strings. An entry holds what the dict entry holds (its
-- epoch, its end, the hit's RetryAfter and Remaining at a time t0) and
-- the answer's strings for its current whole second of RetryAfter. It is
-- repeated exactly as long as the dict's entry would be (same end, same
-- epoch: a reset through any worker ends it), so it denies nothing the
-- dict would not. MEMO_MAX entries per limiter and worker at most (keys of
-- at most SHORT_KEY bytes), then the memo starts over: under 1 MB.
_M.MEMO_MAX = 1024

-- memo_get returns the memo entry of key at site while it holds, and the
-- hit's RetryAfter now (µs); else nil.
function _M.memo_get(self, site, key)
  local m = self.memo[site]
  local e = m and m[key]
  if not e then return nil end
  if e.epoch == (self.deny:get(self.epoch_key) or 0) then
    local now = clock()
    if now + 0.001 < e.hold then
      local retry = e.retry - (now - e.t0) * 1e6
      return e, retry > 0 and retry or 0
    end
  end
  m[key] = nil
  self.nmemo = self.nmemo - 1
  return nil
end

-- memo_put keeps d, a one-hit denial the dict held until hold (s) under
-- epoch, read at t0, as key's entry at site.
function _M.memo_put(self, site, key, d, hold, epoch, t0)
  if #key > SHORT_KEY then return end
  if self.nmemo >= _M.MEMO_MAX then self.memo, self.nmemo = {}, 0 end
  local m = self.memo[site]
  if not m then
    m = {}
    self.memo[site] = m
  end
  if not m[key] then self.nmemo = self.nmemo + 1 end
  local h = d.hits[1]
  m[key] = { hold = hold, epoch = epoch, t0 = t0, retry = h.retry_after, remaining = h.remaining }
end

local function store_denial(self, id, c, d, sent, epoch)
  local h = min(hold(c, d), self.max_age)
  if h <= 0.001 then return end
  buf[0], buf[1], buf[2] = epoch, sent, sent + h
  local hits = d.hits
  for i = 1, #hits do
    local r, k = hits[i], HEAD + (i - 1) * PER_HIT
    buf[k], buf[k + 1], buf[k + 2], buf[k + 3], buf[k + 4] = (r.allowed and 1 or 0) + (r.shadow and 2 or 0),
        r.used, r.remaining, r.retry_after, r.reset_after
  end
  self.deny:set(id, ffi.string(buf, (HEAD + PER_HIT * #hits) * 8), h)
end

-- forget drops every stored denial (after a reset through this limiter).
function _M.forget(self, c)
  if self.deny then self.deny:incr(self.epoch_key, 1, 0) end
end

-- LOG_INTERVAL is the least time between two log lines about decisions
-- taken without Redis, per worker (s): an outage writes a handful of
-- lines, each counting the decisions it stands for.
_M.LOG_INTERVAL = 10

local last_log, suppressed = 0, 0

local function log_degraded(self, err)
  local now = ngx.now()
  if now - last_log < _M.LOG_INTERVAL then
    suppressed = suppressed + 1
    return
  end
  log_line(ngx.WARN, err, "; decided by the ", self.policy, " failure policy (",
    suppressed, " more such decisions since the last line)")
  last_log, suppressed = now, 0
end

-- Checks that failed on their keys' data (bad state) have their own log
-- line, at most one per LOG_INTERVAL per worker, counting the ones in
-- between; it names the check's first hit by its zone and the digest of
-- its key (internal/keyname's), never the key.
local last_bad_log, bad_suppressed = 0, 0

-- key_digest is keyname.Of: "sha256:" and 16 hex digits.
local function key_digest(key)
  return "sha256:" .. keys.sha256_hex(key):sub(1, 16)
end

local function log_bad_state(self, c)
  self.bad_states = self.bad_states + 1
  local now = ngx.now()
  if now - last_bad_log < _M.LOG_INTERVAL then
    bad_suppressed = bad_suppressed + 1
    return
  end
  local h = c.hits[1]
  log_line(ngx.WARN, "sluice: a check failed on the stored state of its keys; the data under them is not sluice's; ",
    "decided by the ", self.policy, " failure policy, not counted by the breaker (zone ", format("%q", h.zone or ""),
    ", key ", key_digest(h.key), "; ", bad_suppressed, " more such checks since the last line)")
  last_bad_log, bad_suppressed = now, 0
end

-- decide decides c: from the deny cache, else from Redis unless the
-- breaker is open, else by the policy.
function _M.decide(self, c, now)
  local err = limits.validate_check(c)
  if err then return nil, err end
  return self:decide_valid(c, now)
end

-- decide_valid is decide for a valid check. id is its deny cache key when
-- the caller has it, and looked that the caller looked it up already;
-- view_id its async view's identity (fingerprint at cost 1) when known.
function _M.decide_valid(self, c, now, id, looked, view_id)
  -- The cache holds denials on nginx's clock: not for checks on a clock
  -- of the caller's.
  local deny = self.deny and c.cost > 0 and not c.shadow and now == nil
  if deny then
    id = id or fingerprint(self, c)
    if not looked then
      local d = self:cached(id)
      if d then return d end
    end
  end
  if self.async and c.cost > 0 and now == nil then return self.async:decide(c, view_id) end
  return self:guarded(c, now, deny and id)
end

-- guarded decides c (validated) on Redis unless the breaker is open, else by
-- the policy; with a deny cache key id, a store denial is kept in the
-- deny cache.
function _M.guarded(self, c, now, id)
  local sc = self.global
  if self.lim.cluster then sc = scope(self, self.lim:node_of(c)) end
  local ok, probe = admit(self, sc)
  if not ok then return self:degraded() end
  local wave = sc.wave
  local sent, epoch, d, err
  if id then
    sent, epoch = clock(), self.deny:get(self.epoch_key) or 0
  end
  d, err = self.lim:check(c, now, true)
  if not d then
    if err:sub(1, #limits.INVALID) == limits.INVALID then return nil, err end
    if err:sub(1, #limits.BAD_STATE) == limits.BAD_STATE then
      -- Redis answered: this check fails alone, by the policy, and the
      -- breaker neither opens nor closes for it (edge.Guard's ErrBadState).
      release(self, sc, probe)
      log_bad_state(self, c)
      return self:degraded(true)
    end
    report(self, sc, false, probe, wave)
    log_degraded(self, err)
    return self:degraded()
  end
  report(self, sc, true, probe)
  if id and not d.allowed then store_denial(self, id, c, d, sent, epoch) end
  return d
end

return _M
