-- sluice: rate limiting in the nginx worker on sluice's own Redis protocol.
--
-- A limiter made by sluice.new decides checks with the scripts of
-- redisstore (sluice/scripts.lua is generated from redisstore/scripts/ and
-- a Go test fails when they differ), the same keys, hash tags, arguments
-- and reply: nginx workers, the Go library and `sluice serve` share one
-- exact limit on one Redis. docs/openresty.md describes every option.
local keys = require "sluice.keys"
local limits = require "sluice.limits"
local protocol = require "sluice.protocol"
local redis = require "sluice.redis"
local scripts = require "sluice.scripts"
local edge = require "sluice.edge"
local http = require "sluice.http"
local request = require "sluice.request"

local format, concat, floor, max = string.format, table.concat, math.floor, math.max
local itoa = keys.itoa

local _M = { _VERSION = "0.1.0" }
local mt = { __index = _M }

_M.parse_limit = limits.parse_limit
_M.parse_limits = limits.parse_limits
_M.limit = limits.new

local UNAVAILABLE = "sluice: store unavailable: "
_M.UNAVAILABLE = UNAVAILABLE
_M.INVALID = limits.INVALID
_M.BAD_STATE = limits.BAD_STATE
local BAD_STATE = limits.BAD_STATE

-- SCRIPT_FAILED is the error of a call the script failed on: a key of
-- the check holds data of another type (sluice.ErrBadState).
local SCRIPT_FAILED = "the script failed on this check's keys: the data under them is not sluice's (a key of another type under the prefix?)"

-- failed_err returns the error of a check whose call failed with err:
-- BAD_STATE when the script failed on its keys, UNAVAILABLE otherwise.
local function failed_err(err)
  if err == SCRIPT_FAILED then return BAD_STATE .. err end
  return UNAVAILABLE .. tostring(err)
end

-- Defaults of the options of new.
_M.DEFAULT_PREFIX = "sluice:"
_M.DEFAULT_TIMEOUT = 50 -- ms
_M.DEFAULT_POOL_SIZE = 64
_M.DEFAULT_KEEPALIVE = 60000 -- ms

local function hex(s)
  return (s:gsub(".", function(c) return format("%02x", c:byte()) end))
end

-- SCRIPTS are redisstore's scripts with their SHA-1 digests.
local SCRIPTS = {}
for name, src in pairs(scripts) do
  SCRIPTS[name] = { src = src, sha = hex(ngx.sha1_bin(src)) }
end
_M.scripts = SCRIPTS

-- random_id returns 8 random bytes in base64url, like redisstore's
-- randomID: the part of a call id that keeps the log members of different
-- processes apart.
local function random_id()
  local f = io.open("/dev/urandom", "rb")
  local b
  if f then
    b = f:read(8)
    f:close()
  end
  if not b or #b ~= 8 then
    b = ngx.sha1_bin(tostring(ngx.now()) .. tostring(ngx.worker.pid()) .. tostring(math.random())):sub(1, 8)
  end
  return (ngx.encode_base64(b):gsub("=", ""):gsub("+", "-"):gsub("/", "_"))
end

local B36 = "0123456789abcdefghijklmnopqrstuvwxyz"
local function base36(n)
  local out = ""
  repeat
    local d = n % 36
    out = B36:sub(d + 1, d + 1) .. out
    n = floor(n / 36)
  until n == 0
  return out
end

-- new returns a limiter. opts:
--   redis: "redis://host:port[/db]", "redis-sentinel://host:port,.../master",
--     "redis-cluster://host:port,..." or rediss variants (TLS; options
--     server_name and ssl_verify, see sluice.redis) (required)
--   prefix: starts every key; no braces (default "sluice:")
--   timeout: ms per Redis call (default 50)
--   pool_size, keepalive: nginx's connection pool per worker (64, 60000 ms)
--   padding: ms added to every TTL (default 0; set it when passing now)
--   batch: false sends one script call per check; by default the checks
--     of one slot that arrive in a worker while MAX_IN_FLIGHT calls are
--     under way go together in the next call (redisstore's MaxBatch)
--   policy: "open" or "closed", what check_or_policy decides when Redis
--     fails (default "open")
--   breaker: name of a lua_shared_dict for the breaker shared by the
--     workers (default none: every check tries Redis)
--   deny_cache: name of a lua_shared_dict holding denials until their
--     RetryAfter (default none)
--   async: true for the asynchronous mode (sluice.async), with
--     sync_interval (ms, 100), processes (deciders sharing a key: default
--     this nginx's worker count), max_view_age (ms, 60000),
--     async_max_keys (10000) and async_max_bytes (4 MiB) per worker, and
--     first_sight (cost admitted per worker on a key without a view while
--     it is sent; default 0, off)
function _M.new(opts)
  if type(opts) ~= "table" or type(opts.redis) ~= "string" then
    return nil, limits.INVALID .. "sluice.new: opts.redis is required"
  end
  local prefix = opts.prefix or _M.DEFAULT_PREFIX
  if prefix:find("[{}]") then
    return nil, limits.INVALID .. format("prefix %q contains a brace, which would change the hash slot of every key", prefix)
  end
  local timeout = opts.timeout or _M.DEFAULT_TIMEOUT
  if type(timeout) ~= "number" or timeout < 1 then
    return nil, limits.INVALID .. "timeout must be >= 1 ms"
  end
  local client, err = redis.new(opts.redis, timeout, opts.pool_size or _M.DEFAULT_POOL_SIZE,
    opts.keepalive or _M.DEFAULT_KEEPALIVE, opts) -- opts.server_name, opts.ssl_verify: TLS
  if not client then return nil, limits.INVALID .. err end
  local self = setmetatable({
    client = client, cluster = client:is_cluster(), prefix = prefix, timeout = timeout,
    padding = itoa(opts.padding or 0), seq = 0,
    policy = opts.policy or "open", batch = opts.batch ~= false, sites = {}, nsites = 0,
  }, mt)
  if self.policy ~= "open" and self.policy ~= "closed" then
    return nil, limits.INVALID .. format("policy %q (want open or closed)", tostring(self.policy))
  end
  local e
  self.edge, e = edge.new(self, opts)
  if not self.edge then return nil, e end
  return self
end

-- registry holds the limiters made by define, by name.
local registry = {}

-- define makes a limiter with new(opts) and keeps it under name, for
-- limiter(name); meant for init_by_lua. It raises an error on bad options,
-- so that nginx refuses to start with them.
function _M.define(name, opts)
  local lim, err = _M.new(opts)
  if not lim then error("sluice.define(" .. tostring(name) .. "): " .. err, 2) end
  registry[name] = lim
  return lim
end

-- limiter returns the limiter define made under name, or raises an error.
function _M.limiter(name)
  local lim = registry[name]
  if not lim then error("sluice: no limiter defined as " .. tostring(name), 2) end
  return lim
end

-- call_id returns a new id for one script call. The random part is drawn
-- again in each worker (a limiter made in init_by_lua is forked into every
-- worker, whose ids must not collide).
local function call_id(self)
  local pid = ngx.worker.pid()
  if self.pid ~= pid then
    self.pid, self.id_prefix, self.seq = pid, random_id(), 0
  end
  self.seq = self.seq + 1
  return self.id_prefix .. "." .. base36(self.seq)
end

local function by_slot_order(a, b) return a.slot < b.slot end

-- plan splits c into calls: one outside a Cluster, one per hash slot in
-- ascending slot order inside (redisstore's plan).
local function plan(self, c, with_specs)
  local calls, by_slot = {}, {}
  for i, h in ipairs(c.hits) do
    local key, tag = keys.state_key(self.prefix, h.zone or "", h.key, c.group, h.limit)
    local slot = self.cluster and keys.slot(tag) or 0
    local cl = by_slot[slot]
    if not cl then
      cl = { slot = slot, hits = {}, keys = {}, specs = {}, cost = c.cost }
      by_slot[slot] = cl
      calls[#calls + 1] = cl
    end
    local n = #cl.hits + 1
    cl.hits[n], cl.keys[n] = i, key
    if with_specs then cl.specs[n] = protocol.spec(h.limit, (c.shadow or h.limit.shadow) and true or false) end
  end
  if #calls > 1 then table.sort(calls, by_slot_order) end
  return calls
end

-- plan_of returns the calls of c (valid) with their limits' specs, as
-- check_batch takes them for a check it is given again and again (the
-- asynchronous mode's flush): what does not change between two calls is
-- built once. The calls' cost is set by check_batch.
function _M.plan_of(self, c)
  return plan(self, c, true)
end

-- node_of returns the address of the Cluster master that owns the hash
-- slot of c's first hit in this worker's slot map (the scope of the
-- breaker, sluice.edge), or nil when the map does not know it yet.
function _M.node_of(self, c)
  local h = c.hits[1]
  local _, tag = keys.state_key(self.prefix, h.zone or "", h.key, c.group, h.limit)
  return self.client:owner(keys.slot(tag))
end

-- decide_call runs decide.lua for one call and decodes its reply.
local function decide_call(self, cl, now)
  local id = call_id(self)
  local ks, args = protocol.encode(now and itoa(now) or "", self.padding, id, { cl })
  local raw, err = self.client:eval(SCRIPTS.decide, ks, args, cl.slot)
  if not raw then return nil, err end
  local replies
  replies, err = protocol.decode(raw, { cl })
  if not replies then return nil, err end
  if not replies[1] then return nil, SCRIPT_FAILED end
  replies[1].id = id .. ".1"
  return replies[1]
end

-- MAX_BATCH is the most checks one decide.lua call decides
-- (redisstore's DefaultMaxBatch).
_M.MAX_BATCH = 64

-- decide_batch decides calls (each the only call of its check, all in one
-- hash slot) with one decide.lua call; it returns one reply per call (false
-- for a check the script failed on), or nil and an error.
local function decide_batch(self, calls, slot)
  local id = call_id(self)
  local ks, args = protocol.encode("", self.padding, id, calls)
  local raw, err = self.client:eval(SCRIPTS.decide, ks, args, slot)
  if not raw then return nil, err end
  local replies
  replies, err = protocol.decode(raw, calls)
  if not replies then return nil, err end
  for j, r in ipairs(replies) do
    if r then r.id = id .. "." .. j end
  end
  return replies
end


-- MAX_IN_FLIGHT is the most batch calls a worker has under way at once
-- per hash slot (redisstore's maxInFlight): while they are, new checks
-- queue, and the next call takes them together. Batches grow with the load
-- and cost no waiting when it is light (no timer).
_M.MAX_IN_FLIGHT = 2

local semaphore = require "ngx.semaphore"

-- lane returns the worker's queue of the limiter for slot: entries
-- queue[head .. tail].
local function lane(self, slot)
  local pid = ngx.worker.pid()
  if self.lanes_pid ~= pid then self.lanes, self.lanes_pid = {}, pid end
  local l = self.lanes[slot]
  if not l then
    l = { queue = {}, head = 1, tail = 0, busy = 0 }
    self.lanes[slot] = l
  end
  return l
end

-- pop returns the oldest queued entry of l that was not abandoned, or nil.
local function pop(l)
  while l.head <= l.tail do
    local e = l.queue[l.head]
    l.queue[l.head] = nil
    l.head = l.head + 1
    if not e.abandoned then return e end
  end
  l.head, l.tail = 1, 0
  return nil
end

-- send_batch sends up to MAX_BATCH queued checks of lane l in one script
-- call, hands each its reply, then passes the lead to the next queued
-- check, if any, which sends the next batch.
local function send_batch(self, l, slot)
  local batch, calls = {}, {}
  while #batch < _M.MAX_BATCH do
    local e = pop(l)
    if not e then break end
    batch[#batch + 1], calls[#calls + 1] = e, e.call
  end
  if #batch > 0 then
    local replies, err = decide_batch(self, calls, slot)
    for k, e in ipairs(batch) do
      if replies then
        e.reply = replies[k]
        if not e.reply then e.err = SCRIPT_FAILED end
      else
        e.err = err
      end
      e.done = true
      if e.waiting then e.sema:post(1) end
    end
    if not replies then
      -- Redis did not answer: the checks queued meanwhile fail at once
      -- with the same error rather than each waiting for a timeout of its
      -- own (redisstore's failQueued).
      local e = pop(l)
      while e do
        e.err, e.done = err, true
        if e.waiting then e.sema:post(1) end
        e = pop(l)
      end
    end
  end
  -- The lead goes to the oldest check still waiting, which stays queued
  -- (its own call takes it).
  while l.head <= l.tail do
    local e = l.queue[l.head]
    if not e.abandoned then
      e.lead = e.lead + 1 -- a count: one check may be handed the lead twice
      if e.waiting then e.sema:post(1) end
      return
    end
    l.queue[l.head] = nil
    l.head = l.head + 1
  end
  l.head, l.tail = 1, 0
  l.busy = l.busy - 1
end

-- coalesced decides the only call of a check in a batch with the checks
-- of the same slot queued meanwhile in this worker; each is decided
-- atomically, as if sent alone. It returns the call's reply, or nil and an
-- error.
local function coalesced(self, cl)
  local l = lane(self, cl.slot)
  -- The semaphore is made when the check first waits: the lead or the
  -- reply given to a check that is not waiting is seen before it waits.
  local e = { call = cl, lead = 0 }
  l.tail = l.tail + 1
  l.queue[l.tail] = e
  if l.busy < _M.MAX_IN_FLIGHT then
    l.busy = l.busy + 1
    send_batch(self, l, cl.slot)
  end
  local wait = self.timeout * 3 / 1000
  while not e.done do
    if e.lead > 0 then
      e.lead = e.lead - 1
      send_batch(self, l, cl.slot)
    else
      e.sema = e.sema or semaphore.new(0)
      e.waiting = true
      local ok = e.sema:wait(wait)
      e.waiting = false
      if not ok and not e.done and e.lead == 0 then
        e.abandoned = true -- never sent: the cost is not spent
        return nil, "timeout waiting for a batch call"
      end
    end
  end
  -- A lead handed over while queued, and then the check taken by another
  -- call: the lead is still this check's to use.
  while e.lead > 0 do
    e.lead = e.lead - 1
    send_batch(self, l, cl.slot)
  end
  if e.err then return nil, e.err end
  e.reply.id = e.reply.id or ""
  return e.reply
end

-- refund takes back the cost of the calls that recorded it although the
-- check was denied in another slot (redisstore's refund).
local function refund(self, c, calls, replies)
  for k, cl in ipairs(calls) do
    local r = replies[k]
    if r and r.allowed then
      local args = { itoa(r.now), itoa(c.cost), r.id }
      for j, sp in ipairs(cl.specs) do
        local at = protocol.recorded_at(sp, r.hits[j].snap, r.now)
        args[#args + 1], args[#args + 2], args[#args + 3], args[#args + 4], args[#args + 5] =
            sp.code, itoa(sp.rate), itoa(sp.window), itoa(sp.bucket), itoa(at)
      end
      local _, err = self.client:eval(SCRIPTS.refund, cl.keys, args, cl.slot)
      if err then
        ngx.log(ngx.WARN, "sluice: refund failed; the cost stays recorded until the keys expire: ", err)
      end
    end
  end
end

-- conclude derives the decision from its hit results (sluice.Decision's
-- Conclude): allowed iff every non-shadow hit allowed, the first
-- non-shadow hit that did not is the denier, retry_after the longest wait
-- of the denying hits.
function _M.conclude(d)
  d.allowed, d.shadowed, d.denier, d.retry_after = true, false, nil, 0
  for i, h in ipairs(d.hits) do
    if not h.allowed then
      if h.shadow then
        d.shadowed = true
      else
        if not d.denier then d.denier = i end
        d.allowed = false
        d.retry_after = max(d.retry_after, h.retry_after)
      end
    end
  end
  return d
end

-- check_one is check for a check of one hit on Redis's clock, batched:
-- the common case (access with one limit), without the loops over hits
-- and calls that keep LuaJIT from compiling the path.
local function check_one(self, c)
  local h = c.hits[1]
  local l = h.limit
  local key, tag = keys.state_key(self.prefix, h.zone or "", h.key, c.group, l)
  local sp = protocol.spec(l, (c.shadow or l.shadow) and true or false)
  local cl = { slot = self.cluster and keys.slot(tag) or 0, hits = { 1 }, keys = { key }, specs = { sp }, cost = c.cost }
  local r, err = coalesced(self, cl)
  if not r then return nil, failed_err(err) end
  local hr = protocol.result(sp, r.hits[1], r.now, c.cost, r.allowed and c.cost > 0)
  -- conclude, for one hit.
  local denies = not hr.allowed and not hr.shadow
  return { source = "store", hits = { hr }, allowed = not denies, shadowed = not hr.allowed and hr.shadow,
    denier = denies and 1 or nil, retry_after = denies and hr.retry_after or 0 }
end

-- check decides c = {hits = {{zone, key, limit}, ...}, cost, group,
-- shadow} at now (µs since the epoch; nil for Redis's TIME, the normal
-- case; valid: c was validated already) on Redis alone, with no failure policy or cache. It returns the
-- decision {allowed, shadowed, source = "store", denier, retry_after,
-- hits = {{allowed, shadow, used, remaining, retry_after, reset_after}}},
-- durations in µs; or nil and an error starting with "sluice: invalid
-- input:", "sluice: store unavailable:" or, when the script failed on
-- what a key of the check holds, "sluice: bad stored state:".
function _M.check(self, c, now, valid)
  local err = not valid and limits.validate_check(c)
  if err then return nil, err end
  if #c.hits == 1 and not now and self.batch then return check_one(self, c) end
  local calls = plan(self, c, true)
  -- failed: the error of a failed call; a store error wins over a
  -- script failure (the check is bad state only when every failed call
  -- failed on its keys, as redisstore's onlyBadState).
  local replies, failed = {}, nil
  for k, cl in ipairs(calls) do
    if #calls == 1 and not now and self.batch then
      replies[k], err = coalesced(self, cl)
    else
      replies[k], err = decide_call(self, cl, now)
    end
    if not replies[k] then
      replies[k] = false
      if failed == nil or failed == SCRIPT_FAILED then failed = err end
    end
  end
  local all = not failed
  for k = 1, #calls do all = all and replies[k] and replies[k].allowed end
  if #calls > 1 and c.cost > 0 and not all then refund(self, c, calls, replies) end
  if failed then return nil, failed_err(failed) end
  local d = { source = "store", hits = {} }
  local recorded = all and c.cost > 0
  for k, cl in ipairs(calls) do
    local r = replies[k]
    for j, i in ipairs(cl.hits) do
      d.hits[i] = protocol.result(cl.specs[j], r.hits[j], r.now, c.cost, recorded)
    end
  end
  return _M.conclude(d)
end

-- check_batch decides valid checks on Redis's clock, each as check does,
-- in as few script calls as it can: the checks of one hash slot together,
-- up to MAX_BATCH a call, each decided atomically as if sent alone (a
-- check across slots goes alone). plans, when given, holds each check's
-- calls (plan_of), made earlier. It returns the decisions and the errors,
-- one of them set per check.
function _M.check_batch(self, checks, plans)
  local ds, errs = {}, {}
  local by_slot, slots = {}, {}
  for i, c in ipairs(checks) do
    local calls = plans and plans[i] or plan(self, c, true)
    if #calls == 1 then
      calls[1].cost = c.cost
      local s = calls[1].slot
      if not by_slot[s] then
        by_slot[s] = {}
        slots[#slots + 1] = s
      end
      local b = by_slot[s]
      b[#b + 1] = { i = i, call = calls[1] }
    else
      ds[i], errs[i] = _M.check(self, c)
    end
  end
  for _, s in ipairs(slots) do
    local all = by_slot[s]
    for from = 1, #all, _M.MAX_BATCH do
      local part, calls = {}, {}
      for k = from, math.min(#all, from + _M.MAX_BATCH - 1) do
        part[#part + 1] = all[k]
        calls[#calls + 1] = all[k].call
      end
      local replies, err = decide_batch(self, calls, s)
      for k, p in ipairs(part) do
        local c, r = checks[p.i], replies and replies[k]
        if not replies then
          errs[p.i] = UNAVAILABLE .. tostring(err)
        elseif not r then
          errs[p.i] = BAD_STATE .. SCRIPT_FAILED
        else
          local d = { source = "store", hits = {} }
          local recorded = r.allowed and c.cost > 0
          for j, hi in ipairs(p.call.hits) do
            d.hits[hi] = protocol.result(p.call.specs[j], r.hits[j], r.now, c.cost, recorded)
          end
          ds[p.i] = _M.conclude(d)
        end
      end
    end
  end
  return ds, errs
end

-- MAX_RECORD_BATCH is the most records one record.lua call takes
-- (redisstore's MaxRecordBatch).
_M.MAX_RECORD_BATCH = 512

-- record_key returns the state key, limit spec and hash slot of the one
-- hit of c, a check for record_batch.
function _M.record_key(self, c)
  local h = c.hits[1]
  return self:record_key_of(h.zone, h.key, c.group, h.limit, c.shadow)
end

-- record_key_of is record_key for a check given by its parts.
function _M.record_key_of(self, zone, key, group, limit, shadow)
  local skey, tag = keys.state_key(self.prefix, zone or "", key, group, limit)
  return skey, protocol.spec(limit, (shadow or limit.shadow) and true or false),
      self.cluster and keys.slot(tag) or 0
end

-- record_batch adds costs[j] to the state keys[j] (limit specs[j], slot
-- slots[j]) where it fits, as redisstore's RecordBatch does: record.lua,
-- one call per hash slot and MAX_RECORD_BATCH records, on Redis's clock.
-- It returns one outcome per record: 1 recorded, 0 did not fit, -1 the
-- script failed on its key, false its call failed (err: the last error).
-- per, when given, is the most records per call (at most
-- MAX_RECORD_BATCH).
function _M.record_batch(self, ks, specs, slots, costs, n, per)
  local out, last_err = {}, nil
  local by_slot, order = {}, {}
  for j = 1, n do
    local s = slots[j]
    local b = by_slot[s]
    if not b then
      b = {}
      by_slot[s] = b
      order[#order + 1] = s
    end
    b[#b + 1] = j
  end
  per = math.min(per or _M.MAX_RECORD_BATCH, _M.MAX_RECORD_BATCH)
  for _, s in ipairs(order) do
    local all = by_slot[s]
    for from = 1, #all, per do
      local to = math.min(#all, from + per - 1)
      local limits, refs, nl, cks = {}, {}, 0, {}
      local args = { "", self.padding, call_id(self), 0 }
      for k = from, to do
        local j = all[k]
        local sp = specs[j]
        local r = refs[sp]
        if not r then
          nl = nl + 1
          r, limits[nl], refs[sp] = nl, sp, tostring(nl) -- the argument, made once per limit
        end
        cks[k - from + 1] = ks[j]
      end
      args[4] = nl
      for l = 1, nl do
        local sp, a = limits[l], #args
        args[a + 1], args[a + 2], args[a + 3], args[a + 4], args[a + 5] =
            sp.code, sp.a_rate, sp.a_window, sp.a_bucket, sp.a_shadow
      end
      local a = #args
      for k = from, to do
        local j = all[k]
        local cost = costs[j]
        -- Costs are integers up to 1e9, which tostring prints exactly
        -- (string.format is not compiled by LuaJIT); cost 1, the usual
        -- one, is a constant.
        args[a + 1], args[a + 2] = cost == 1 and "1" or tostring(cost), refs[specs[j]]
        a = a + 2
      end
      local raw, err = self.client:eval(SCRIPTS.record, cks, args, s)
      if type(raw) ~= "table" or #raw ~= to - from + 2 then
        last_err = err or "record.lua: unexpected reply"
        raw = nil
      end
      for k = from, to do
        out[all[k]] = raw and tonumber(raw[k - from + 2]) or false
      end
    end
  end
  return out, last_err
end

-- reset deletes the state of every hit of c (cost ignored), one call per
-- hash slot. It returns true, or nil and an error.
function _M.reset(self, c)
  local cost = c.cost
  c.cost = 0
  local err = limits.validate_check(c)
  c.cost = cost
  if err then return nil, err end
  for _, cl in ipairs(plan(self, c, false)) do
    local _, e = self.client:eval(SCRIPTS.reset, cl.keys, {}, cl.slot)
    if e then return nil, UNAVAILABLE .. tostring(e) end
  end
  self.edge:forget(c)
  if self.edge.async then self.edge.async:reset_worker() end
  return true
end

-- decide is check behind the edge: the deny cache, the breaker and the
-- failure policy, and the asynchronous mode when configured. It returns a
-- decision whose source is "store", "deny-cache", "local-view",
-- "fail-open" or "fail-closed", or nil and an invalid-input error.
function _M.decide(self, c, now)
  return self.edge:decide(c, now)
end

-- parsed holds the limits of the spec strings access was given, per
-- worker; specs come from the configuration, and the table is emptied
-- past MAX_PARSED entries all the same.
local parsed, nparsed, MAX_PARSED = {}, 0, 1000

-- limits_of returns the limits of opts.limits: a spec string such as
-- "10r/s, 500r/h" (with opts.algorithm, opts.resolution µs), or a list of
-- limits made by sluice.limit or sluice.parse_limit.
local function limits_of(opts)
  local spec = opts.limits
  if type(spec) == "table" then return spec end
  if type(spec) ~= "string" then return nil, limits.INVALID .. "access: opts.limits is required" end
  local algorithm = opts.algorithm or "sliding-window"
  local ck = spec .. "|" .. algorithm .. "|" .. tostring(opts.resolution or 0)
  local ls = parsed[ck]
  if ls then return ls end
  local err
  ls, err = limits.parse_limits(spec)
  if not ls then return nil, err end
  for _, l in ipairs(ls) do
    l.algorithm, l.resolution = algorithm, opts.resolution or 0
    err = limits.validate(l)
    if err then return nil, err end
  end
  if nparsed >= MAX_PARSED then parsed, nparsed = {}, 0 end
  parsed[ck], nparsed = ls, nparsed + 1
  return ls
end

-- sites holds, per worker, what access derives once from its arguments
-- for a spec string: the limits, the fields' shared parts (http.prepare)
-- and the deny cache key's prefix; by limiter, spec (with algorithm,
-- resolution, shadow) and zone. Emptied past MAX_SITES entries.
local MAX_SITES = 1000

local function site_of(self, opts)
  local spec, zone = opts.limits, opts.zone or ""
  local k = spec
  if opts.algorithm or opts.resolution or opts.shadow then
    k = spec .. "|" .. tostring(opts.algorithm) .. "|" .. tostring(opts.resolution) .. "|" .. tostring(opts.shadow and true)
  end
  local sites = self.sites
  local by_zone = sites[k]
  local site = by_zone and by_zone[zone]
  if site then return site end
  if type(zone) ~= "string" then return nil, limits.INVALID .. "access: opts.zone must be a string" end
  local ls, err = limits_of(opts)
  if not ls then return nil, err end
  local sample = { hits = {}, cost = 1, shadow = opts.shadow and true or false }
  for i, l in ipairs(ls) do sample.hits[i] = { zone = zone, key = "k", limit = l } end
  err = limits.validate_check(sample)
  if err then return nil, err end
  site = { ls = ls, zone = zone, n = #ls, shadow = sample.shadow }
  -- The deny cache key of a check of cost 1 without group, and the
  -- async view's identity of any: the prefix and the key.
  site.deny_prefix = self.edge:deny_prefix(1, nil, false, zone, ls)
  site.deny_eq = site.deny_prefix .. "=" -- and a short key: edge.deny_key's form, one concatenation
  http.prepare(site, sample)
  if self.nsites >= MAX_SITES then self.sites, self.nsites = {}, 0 end
  sites = self.sites
  if not sites[k] then sites[k] = {} end
  sites[k][zone], self.nsites = site, self.nsites + 1
  return site
end

-- access_site is access for a spec string. A check of cost 1 without a
-- group on a string key is valid by construction (the site's limits were
-- validated together): it skips validation, and behind a deny cache a
-- cached denial is answered from the dict without building the check.
local function access_site(self, opts, site, key)
  local cost, group, now = opts.cost or 1, opts.group, opts.now
  local edge = self.edge
  local fast = cost == 1 and group == nil and now == nil and type(key) == "string" and #key <= limits.MAX_KEY_LEN
  local memo = fast and site.n == 1 and not site.shadow and edge.deny
  if memo then
    local e, retry = edge:memo_get(site, key)
    if e then return http.deny_memo(opts.status or 429, site, e, retry) end
  end
  local id = fast and not site.shadow and
      (#key <= edge.SHORT_KEY and site.deny_eq .. key or site.deny_prefix .. edge.deny_key(key))
  if id and edge.deny then
    local d, hold, epoch, t0 = edge:cached(id)
    if d then
      if memo then edge:memo_put(site, key, d, hold, epoch, t0) end
      return http.deny_site(opts.status or 429, site, d)
    end
  end
  -- Async, one limit, no deny cache: a check decided from a view, or a
  -- first sight, is decided without the check's tables.
  local async, tried, view = edge.async, nil, nil
  if id and async and site.n == 1 and not edge.deny then
    local d
    d, view = async:decide_one(site.ls[1], site.zone, key, id)
    if d then
      if not d.allowed then return http.deny_site(opts.status or 429, site, d) end
      if opts.headers ~= "denied" then http.set_site_fields(site, d) end
      return d
    end
    tried = true
  end
  local hits, zone = nil, site.zone
  if site.n == 1 then
    hits = { { zone = zone, key = key, limit = site.ls[1] } }
  else
    hits = {}
    for i = 1, site.n do hits[i] = { zone = zone, key = key, limit = site.ls[i] } end
  end
  local c = { hits = hits, cost = cost, group = group, shadow = site.shadow }
  local d, err
  if tried then
    d, err = async:decide(c, id, true, view)
  elseif fast then
    d, err = edge:decide_valid(c, nil, id or nil, true, id or nil)
  else
    d, err = self:decide(c, now)
  end
  if not d then return http.problem(400, "Bad request", err) end
  if not d.allowed then return http.deny_site(opts.status or 429, site, d) end
  if opts.headers ~= "denied" then http.set_site_fields(site, d) end
  return d
end

-- sources holds the key sources access and key compiled, per worker, by
-- their text; emptied past MAX_SOURCES entries.
local sources, nsources, MAX_SOURCES = {}, 0, 1000

local function flat(v)
  if type(v) ~= "table" then return tostring(v) end
  local out = {}
  for i, x in ipairs(v) do out[i] = tostring(x) end
  return concat(out, "\0")
end

-- source_of returns the compiled key source of opts (from, first_of,
-- trusted_proxies), or nil and an invalid-input error.
local function source_of(opts)
  local from, first_of, trusted = opts.from, opts.first_of, opts.trusted_proxies
  local k = from
  if type(from) ~= "string" or first_of ~= nil or trusted ~= nil then
    k = flat(from) .. "\1" .. flat(first_of) .. "\1" .. flat(trusted)
  end
  local src = sources[k]
  if src then return src end
  local err
  src, err = request.source(from, first_of, trusted)
  if not src then return nil, limits.INVALID .. "key source: " .. err end
  if nsources >= MAX_SOURCES then sources, nsources = {}, 0 end
  sources[k], nsources = src, nsources + 1
  return src
end

-- key returns the key of the running request as sluice serve derives it
-- from the key source of opts: from (a part, such as "query:token",
-- "header:X-API-Key", "cookie:session" or "client-address", or a list of
-- parts joined with "|"), or first_of (a list of parts, the first present
-- counting, prefixed with its index and ":"), with trusted_proxies (the
-- addresses and CIDR prefixes whose X-Forwarded-For and X-Real-IP
-- client-address believes; default none). Query arguments are
-- percent-decoded, names and values, and the first argument of the name
-- counts. It returns the key, or nil and why the request has none; or
-- nil and an error starting with "sluice: invalid input:" for a bad
-- source.
function _M.key(opts)
  local src, err = source_of(opts)
  if not src then return nil, err end
  return request.key(src)
end

-- access is the one call of access_by_lua: it checks the request's key
-- (opts.from or opts.first_of, with opts.trusted_proxies, read as key
-- reads it; or opts.key, any string) in opts.zone under opts.limits, at opts.cost
-- (default 1), with opts.group and opts.shadow, behind the edge (deny
-- cache, breaker, failure policy). A denial ends the request with
-- opts.status (default 429), Retry-After, the RateLimit fields and a
-- quota-exceeded problem, as sluice serve answers; an allowed request
-- goes on, with the RateLimit fields unless opts.headers is "denied". A
-- missing key or a bad limit answers 400. It returns the decision.
function _M.access(self, opts)
  -- A spec string's limits are derived once per location (site); a table
  -- of limits is read each time.
  local site, ls, err
  if type(opts.limits) == "string" then
    site, err = site_of(self, opts)
  else
    ls, err = limits_of(opts)
  end
  if not site and not ls then
    ngx.log(ngx.ERR, err)
    return http.problem(500, "Rate limiter misconfigured", "the rate limit of this location is invalid")
  end
  local key = opts.key
  if opts.from ~= nil or opts.first_of ~= nil then
    if key ~= nil then
      err = limits.INVALID .. "access: set key or a key source (from, first_of), not both"
    else
      key, err = _M.key(opts)
    end
    if err and err:sub(1, #limits.INVALID) == limits.INVALID then
      ngx.log(ngx.ERR, err)
      return http.problem(500, "Rate limiter misconfigured", "the rate limit key of this location is invalid")
    end
  end
  if key == nil or key == "" then
    return http.problem(400, "No rate limit key", "the request has no rate limit key")
  end
  if site then return access_site(self, opts, site, key) end
  local zone = opts.zone or ""
  local c = { hits = {}, cost = opts.cost or 1, group = opts.group, shadow = opts.shadow }
  for i, l in ipairs(ls) do c.hits[i] = { zone = zone, key = key, limit = l } end
  local d
  d, err = self:decide(c, opts.now)
  if not d then return http.problem(400, "Bad request", err) end
  if not d.allowed then return http.deny(opts.status or 429, c, d) end
  if opts.headers ~= "denied" then http.set_fields(c, d) end
  return d
end

return _M
