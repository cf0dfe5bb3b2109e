-- sluice.edge: what decides in front of Redis, in the workers' shared
-- memory: the failure policy and a breaker shared by the workers
-- (lua_shared_dict), and the deny cache. It follows package edge of the Go
-- module (edge/doc.go): same policy, same breaker, same deny cache rule.
local limits = require "sluice.limits"

local format, concat, max, min, random = string.format, table.concat, math.max, math.min, math.random
local shared = ngx.shared

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
  if opts.async then
    self.async, err = require("sluice.async").new(lim, self, opts)
    if not self.async then return nil, limits.INVALID .. err end
  end
  return self
end

-- degraded is the decision of the failure policy.
function _M.degraded(self)
  if self.policy == "closed" then
    return { allowed = false, shadowed = false, source = "fail-closed", hits = {},
      retry_after = _M.FAIL_CLOSED_RETRY_AFTER }
  end
  return { allowed = true, shadowed = false, source = "fail-open", hits = {}, retry_after = 0 }
end

-- Breaker, in the shared dict: "f" consecutive failures, "u" open until
-- (s), "b" the current back-off (s), "p" a probe under way.

-- admit reports whether a store call may be made now, and whether it is
-- the probe.
local function admit(self)
  local b = self.breaker
  if not b then return true end
  local untl = b:get(self.ns .. "u")
  if not untl then return true end
  ngx.update_time()
  if ngx.now() < untl then return false end
  -- One probe for every worker: add fails while another is under way.
  local ok = b:add(self.ns .. "p", true, self.lim.timeout / 1000 * 4 + 1)
  return ok, true
end

local function report(self, ok, probe)
  local b = self.breaker
  if not b then return end
  local ns = self.ns
  if ok then
    if b:get(ns .. "f") or b:get(ns .. "u") then
      b:delete(ns .. "f")
      b:delete(ns .. "u")
      b:delete(ns .. "b")
      b:delete(ns .. "p")
      ngx.log(ngx.NOTICE, "sluice: breaker closed: Redis answers again")
    end
    return
  end
  local f = b:incr(ns .. "f", 1, 0)
  if probe or (f and f >= self.failures and not b:get(ns .. "u")) then
    local back = b:get(ns .. "b")
    back = back and min(back * 2, self.max_backoff) or self.backoff
    b:set(ns .. "b", back)
    ngx.update_time()
    b:set(ns .. "u", ngx.now() + back * (1 - random() / 4))
    b:delete(ns .. "p")
    ngx.log(ngx.WARN, "sluice: breaker open for ", back, " s after ", f, " failed Redis calls")
  end
end

-- Deny cache: a denial stored under a digest of the check's identity, with
-- the time the check was sent and its hit results.

local function fingerprint(self, c)
  local parts = { self.ns, c.cost, c.group or "", c.shadow and 1 or 0 }
  for _, h in ipairs(c.hits) do
    local l = h.limit
    parts[#parts + 1] = format("|%d:%s|%d:%s|%s%.0f/%.0f/%.0f/%d", #h.zone, h.zone, #h.key, h.key,
      l.code, l.rate, l.window, l.bucket, l.shadow and 1 or 0)
  end
  return "d" .. ngx.sha1_bin(concat(parts, "|"))
end

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

local function encode_hits(d)
  local out = {}
  for i, h in ipairs(d.hits) do
    out[i] = format("%d,%d,%.17g,%.0f,%.0f,%.0f", h.allowed and 1 or 0, h.shadow and 1 or 0, h.used,
      h.remaining, h.retry_after, h.reset_after)
  end
  return concat(out, ";")
end

local function decode_hits(s, elapsed)
  local hits = {}
  for a, sh, used, rem, retry, reset in s:gmatch("(%d),(%d),([^,]+),([^,]+),([^,]+),([^;]+)") do
    hits[#hits + 1] = {
      allowed = a == "1", shadow = sh == "1", used = tonumber(used), remaining = tonumber(rem),
      retry_after = max(0, tonumber(retry) - elapsed), reset_after = max(0, tonumber(reset) - elapsed),
    }
  end
  return hits
end

local function cached(self, c)
  local v = self.deny:get(fingerprint(self, c))
  if not v then return nil end
  local epoch, sent, untl, hits = v:match("^(%d+) ([^ ]+) ([^ ]+) (.*)$")
  if tonumber(epoch) ~= (self.deny:get(self.ns .. "epoch") or 0) then return nil end
  ngx.update_time()
  local now = ngx.now()
  -- now is in whole ms, up to 1 ms behind the clock: a denial is repeated
  -- only while it certainly holds.
  if now + 0.001 >= tonumber(untl) then return nil end
  local lim = require "sluice"
  local d = { source = "deny-cache", hits = decode_hits(hits, (now - tonumber(sent)) * 1e6) }
  lim.conclude(d)
  if d.allowed then return nil end
  d.retry_after = max(d.retry_after, 1)
  return d
end

local function store_denial(self, c, d, sent, epoch)
  local h = min(hold(c, d), self.max_age)
  if h <= 0.001 then return end
  local v = format("%d %.3f %.3f %s", epoch, sent, sent + h, encode_hits(d))
  self.deny:set(fingerprint(self, c), v, h)
end

-- forget drops every stored denial (after a reset through this limiter).
function _M.forget(self, c)
  if self.deny then self.deny:incr(self.ns .. "epoch", 1, 0) end
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
  ngx.log(ngx.WARN, err, "; decided by the ", self.policy, " failure policy (",
    suppressed, " more such decisions since the last line)")
  last_log, suppressed = now, 0
end

-- decide decides c: from the deny cache, else from Redis unless the
-- breaker is open, else by the policy.
function _M.decide(self, c, now)
  local err = limits.validate_check(c)
  if err then return nil, err end
  -- The cache holds denials on nginx's clock: not for checks on a clock
  -- of the caller's.
  local deny = self.deny and c.cost > 0 and not c.shadow and now == nil
  if deny then
    local d = cached(self, c)
    if d then return d end
  end
  if self.async and c.cost > 0 and now == nil then return self.async:decide(c) end
  return self:guarded(c, now, deny)
end

-- guarded decides c (validated) on Redis unless the breaker is open, else by
-- the policy; with deny, a store denial is kept in the deny cache.
function _M.guarded(self, c, now, deny)
  local ok, probe = admit(self)
  if not ok then return self:degraded() end
  local sent, epoch, d, err
  if deny then
    ngx.update_time()
    sent, epoch = ngx.now(), self.deny:get(self.ns .. "epoch") or 0
  end
  d, err = self.lim:check(c, now, true)
  if not d then
    if err:sub(1, #limits.INVALID) == limits.INVALID then return nil, err end
    report(self, false, probe)
    log_degraded(self, err)
    return self:degraded()
  end
  report(self, true, probe)
  if deny and not d.allowed then store_denial(self, c, d, sent, epoch) end
  return d
end

return _M
