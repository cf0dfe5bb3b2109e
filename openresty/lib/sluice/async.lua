-- sluice.async: the asynchronous mode, edge.Async of the Go module done in
-- a worker. A check whose identity (hits, group, shadow flag) has a fresh
-- view, the store's last answer about it, is decided in the worker without
-- I/O (source "local-view"): it is allowed when the cost admitted here and
-- not yet recorded, plus its own, fits in this worker's budget, what
-- remained at the last answer divided by `processes` (rounded up), on
-- every non-shadow hit. Allowed cost becomes pending; one timer per worker
-- (ngx.timer.every, never a timer per request) sends the pending cost of
-- every identity each sync_interval, in batched script calls, and each
-- reply becomes the identity's new view. A check without a usable view
-- (first seen, older than max_view_age, or the table full) goes to the
-- store synchronously, through the breaker and the failure policy.
--
-- Over-admission: a worker admits at most its budget ceil(R/P) between two
-- answers about an identity, R what remained at the last answer, P the
-- `processes` option; and at most what it admits in a round, λ·(T + 2L)
-- for a local rate λ, interval T and flush latency L. For N workers in the
-- fleet sharing a key that fills: over-admission <= N·min(ceil(Rate/P),
-- λ·(T + 2L)); with P = N about one Rate at worst. A flush the store
-- denies (the key filled meanwhile) records what remained and counts the
-- rest as unrecorded (stats().unrecorded).
local ceil, max, min, concat, format = math.ceil, math.max, math.min, table.concat, string.format

local _M = {}
local mt = { __index = _M }

-- Defaults of the async options.
_M.SYNC_INTERVAL = 100 -- ms
_M.MAX_VIEW_AGE = 60000 -- ms
_M.MAX_KEYS = 10000 -- per worker
_M.MAX_BYTES = 4 * 1024 * 1024 -- per worker: keys, zones and a fixed cost per view

-- VIEW_BYTES is the fixed cost counted per view, beyond its strings.
local VIEW_BYTES = 256

function _M.new(lim, edge, opts)
  local self = setmetatable({
    lim = lim, edge = edge,
    interval = (opts.sync_interval or _M.SYNC_INTERVAL) / 1000,
    processes = opts.processes,
    max_view_age = (opts.max_view_age or _M.MAX_VIEW_AGE) / 1000,
    max_keys = opts.async_max_keys or _M.MAX_KEYS,
    max_bytes = opts.async_max_bytes or _M.MAX_BYTES,
  }, mt)
  if self.interval < 0.001 then return nil, "sync_interval must be >= 1 ms" end
  self:reset_worker()
  return self
end

-- reset_worker starts this worker's state: a limiter made in init_by_lua
-- is forked into every worker, each with views and a timer of its own.
function _M.reset_worker(self)
  self.pid = ngx.worker and ngx.worker.pid and ngx.worker.pid() or 0
  self.views, self.nkeys, self.nbytes, self.queue = {}, 0, 0, {}
  self.timer = false
  self.stats = { ["local"] = 0, sync = 0, flushes = 0, flushed = 0, unrecorded = 0, failed = 0, full = 0 }
end

local function identity(c)
  local parts = { c.group or "", c.shadow and "1" or "0" }
  for _, h in ipairs(c.hits) do
    local l = h.limit
    parts[#parts + 1] = format("%d:%s|%d:%s|%s%.0f/%.0f/%.0f/%d", #h.zone, h.zone, #h.key, h.key,
      l.code, l.rate, l.window, l.bucket, l.shadow and 1 or 0)
  end
  return ngx.sha1_bin(concat(parts, "|"))
end

local function enqueue(self, id, v)
  if not v.queued then
    v.queued = true
    self.queue[#self.queue + 1] = id
  end
end

-- set_view takes decision d, the store's answer at now, as v's view.
local function set_view(v, d, now)
  v.at = now
  for i, h in ipairs(d.hits) do
    v.rem[i], v.used[i], v.retry[i], v.reset[i] = h.remaining, h.used, h.retry_after, h.reset_after
  end
end

local flush

local function ensure_timer(self)
  local pid = ngx.worker.pid()
  if self.pid ~= pid then self:reset_worker() end
  if self.timer then return end
  local ok, err = ngx.timer.every(self.interval, flush, self)
  if not ok then
    ngx.log(ngx.ERR, "sluice: async: cannot start the flush timer: ", err)
    return
  end
  self.timer = true
end

-- decide decides c (valid, cost > 0, Redis's clock).
function _M.decide(self, c)
  ensure_timer(self)
  local id = identity(c)
  local v = self.views[id]
  local now = ngx.now()
  if v and now - v.at <= self.max_view_age then
    v.last = now
    local P = self.processes or ngx.worker.count()
    local owed = v.pending + v.inflight
    local d = { source = "local-view", hits = {} }
    for i, h in ipairs(c.hits) do
      local shadow = (c.shadow or h.limit.shadow) and true or false
      local fits = owed + c.cost <= ceil(v.rem[i] / P)
      d.hits[i] = {
        allowed = fits, shadow = shadow, used = v.used[i] + owed, remaining = max(0, v.rem[i] - owed),
        retry_after = fits and 0 or max(v.retry[i], self.interval * 1e6), reset_after = v.reset[i],
      }
    end
    self.lim.conclude(d)
    if d.allowed then
      v.pending = v.pending + c.cost
      for _, h in ipairs(d.hits) do
        h.used, h.remaining = h.used + c.cost, max(0, h.remaining - c.cost)
      end
      enqueue(self, id, v)
    elseif now - v.at > self.interval then
      v.refresh = true -- a key denied here is looked at again, in case it refilled
      enqueue(self, id, v)
    end
    self.stats["local"] = self.stats["local"] + 1
    return d
  end
  self.stats.sync = self.stats.sync + 1
  local d, err = self.edge:guarded(c)
  if not d then return nil, err end
  if d.source ~= "store" then return d end
  if not v then
    local bytes = VIEW_BYTES
    for _, h in ipairs(c.hits) do bytes = bytes + #h.key + #h.zone end
    if self.nkeys >= self.max_keys or self.nbytes + bytes > self.max_bytes then
      self.stats.full = self.stats.full + 1
      return d
    end
    v = { check = c, bytes = bytes, pending = 0, inflight = 0, rem = {}, used = {}, retry = {}, reset = {} }
    self.views[id] = v
    self.nkeys, self.nbytes = self.nkeys + 1, self.nbytes + bytes
  end
  set_view(v, d, now)
  v.last = now
  return d
end

-- sweep forgets the views unused for max_view_age that owe nothing.
local function sweep(self, now)
  for id, v in pairs(self.views) do
    if now - v.last > self.max_view_age and v.pending == 0 and v.inflight == 0 and not v.queued then
      self.views[id] = nil
      self.nkeys, self.nbytes = self.nkeys - 1, self.nbytes - v.bytes
    end
  end
end

-- send decides the checks of ids (a copy of each identity's check with
-- cost, 0 for a refresh) in batched calls, and takes the answers.
local function send(self, ids, costs)
  local checks = {}
  for k, id in ipairs(ids) do
    local c = self.views[id].check
    checks[k] = { hits = c.hits, group = c.group, shadow = c.shadow, cost = costs[k] }
  end
  local ds, errs = self.lim:check_batch(checks)
  local now = ngx.now()
  local again, again_costs = {}, {}
  for k, id in ipairs(ids) do
    local v, d = self.views[id], ds[k]
    if not d then
      -- Owed still: sent again next round; the view ages meanwhile.
      v.pending, v.inflight = v.pending + v.inflight, 0
      enqueue(self, id, v)
      self.stats.failed = self.stats.failed + 1
      if k == 1 then ngx.log(ngx.WARN, "sluice: async flush failed: ", errs[k]) end
    elseif d.allowed or costs[k] == 0 then
      set_view(v, d, now)
      v.inflight, v.refresh = 0, false
      self.stats.flushed = self.stats.flushed + costs[k]
    else
      -- Denied: nothing recorded. Record what remains, count the rest.
      local r = costs[k]
      for i, h in ipairs(d.hits) do
        if not h.shadow then r = min(r, h.remaining) end
      end
      self.stats.unrecorded = self.stats.unrecorded + costs[k] - r
      if r > 0 then
        again[#again + 1], again_costs[#again_costs + 1] = id, r
        v.inflight = r
      else
        v.inflight = 0
      end
      set_view(v, d, now)
      for i in ipairs(d.hits) do v.rem[i] = 0 end
    end
  end
  return again, again_costs
end

-- flush is the worker's timer: it sends the queue.
flush = function(premature, self)
  if self.pid ~= ngx.worker.pid() then return end
  -- One round at a time: ngx.timer.every fires again while a slow round
  -- is still sending, and two rounds would share the keys' in-flight cost.
  if self.flushing then return end
  local queue = self.queue
  if #queue == 0 then return end
  self.queue = {}
  self.flushing = true
  local ok, err = pcall(_M.round, self, queue)
  self.flushing = false
  if not ok then ngx.log(ngx.ERR, "sluice: async flush round failed: ", err) end
end

-- round sends the pending cost of the queued keys, and the refreshes.
function _M.round(self, queue)
  local ids, costs = {}, {}
  for _, id in ipairs(queue) do
    local v = self.views[id]
    if v then
      v.queued = false
      if v.pending > 0 then
        v.inflight, v.pending = v.pending, 0
        ids[#ids + 1], costs[#costs + 1] = id, v.inflight
      elseif v.refresh then
        ids[#ids + 1], costs[#costs + 1] = id, 0
      end
    end
  end
  self.stats.flushes = self.stats.flushes + 1
  local again, again_costs = send(self, ids, costs)
  if #again > 0 then send(self, again, again_costs) end
  local now = ngx.now()
  if not self.swept or now - self.swept > 10 then
    sweep(self, now)
    self.swept = now
  end
end

return _M
