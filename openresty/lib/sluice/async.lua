-- sluice.async: the asynchronous mode, edge.Async of the Go module done in
-- a worker: decide from the store's last answer minus the cost admitted
-- here since, and send that cost in the background.
--
-- A check whose identity (hits, group, shadow flag) has a fresh view, the
-- store's last answer about it, is decided in the worker without I/O
-- (source "local-view"): it is allowed when the cost admitted here and not
-- yet recorded, plus its own, fits in this worker's share, what remained
-- at the last answer divided by `processes` (rounded down), on every
-- non-shadow hit; a check that does not fit while the store may still
-- admit it is decided by the store. Allowed cost becomes pending. One timer per worker
-- (ngx.timer.every, never a timer per request) sends the pending cost of
-- the views each sync_interval, in batched script calls, and each reply
-- becomes the view. A check without a usable view (first seen, older than
-- max_view_age, forgotten) goes to the store synchronously, through the
-- breaker and the failure policy; the answer becomes the key's view from
-- its fifth sight in a short while on (SIGHTS; until then a key is only a
-- mark, a number in an array of the worker's: no string is held for it,
-- and its checks cost what they cost in sync mode). With
-- first_sight, a key without a view is admitted here up to first_sight
-- while its cost goes with the next flush (a blind view).
--
-- Over-admission: a worker admits locally at most its share floor(R/P)
-- between two answers about an identity, R what remained at the last
-- answer, P the `processes` option (default: this nginx's workers). When
-- P is at least the number N of workers in the fleet sharing the key, the
-- shares add up to at most R: none, whatever the traffic; with fewer, at
-- most (N/P - 1)·R per answer, R <= Rate. With first_sight on, also
-- N·first_sight per key and sighting. A flush the store denies (the key
-- filled meanwhile) records what remained and counts the rest as
-- unrecorded (stats.unrecorded). A flush that fails keeps the cost owed,
-- but for what was admitted more than a window ago, which is dropped
-- (stats.dropped).
--
-- The flush shares the worker's event loop with the requests: a tick sends
-- at most FLUSH_MAX checks, in calls of FLUSH_BATCH, building each call
-- only when the previous one is answered and the requests that came
-- meanwhile have run (each call waits on the socket, then the round
-- yields); a view's calls (state keys, specs) are built on its first flush
-- and kept. A key denied here asks the store again only
-- once the store's RetryAfter of its answer has passed: other deciders can
-- only add usage, so it could not pass sooner.
local floor, max, min = math.floor, math.max, math.min
local new_tab = require "table.new"
local ffi = require "ffi"
local bit = require "bit"
local band, bor, rshift, lshift = bit.band, bit.bor, bit.rshift, bit.lshift

local _M = {}
local mt = { __index = _M }

-- Defaults of the async options.
_M.SYNC_INTERVAL = 100 -- ms
_M.MAX_VIEW_AGE = 60000 -- ms
_M.MAX_KEYS = 10000 -- per worker
_M.MAX_BYTES = 4 * 1024 * 1024 -- per worker: keys, zones and a fixed cost per view

-- FLUSH_MAX is the most checks one tick sends; the rest waits for the
-- next tick, in order.
_M.FLUSH_MAX = 512

-- FLUSH_BATCH is the most checks of one flush call: building a call and
-- taking its answers hold the worker's event loop (the requests wait) for
-- a few µs per check each.
_M.FLUSH_BATCH = 16

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
    first_sight = opts.first_sight or 0,
  }, mt)
  if self.interval < 0.001 then return nil, "sync_interval must be >= 1 ms" end
  if type(self.first_sight) ~= "number" or self.first_sight < 0 or self.first_sight ~= math.floor(self.first_sight) then
    return nil, "first_sight must be an integer >= 0"
  end
  -- The marks of keys without a view: 2^bits slots, at least twice the
  -- marks of two generations (max_keys), 2^20 at most.
  local bits = 10
  while bits < 20 and 2 ^ bits < 2 * self.max_keys do bits = bits + 1 end
  self.mark_bits, self.mark_mask = bits, 2 ^ bits - 1
  self:reset_worker()
  return self
end

-- generation returns an empty generation, sized for half of max_keys: it
-- fills without rehashing.
local function generation(self)
  return new_tab(0, min(max(1, self.max_keys / 2), 65536))
end

-- reset_worker starts this worker's state: a limiter made in init_by_lua
-- is forked into every worker, each with views and a timer of its own.
function _M.reset_worker(self)
  local pid = ngx.worker and ngx.worker.pid and ngx.worker.pid() or 0
  -- The timer is the worker's: kept by a reset in the worker that runs it
  -- (lim:reset), else a second one would be started.
  if pid ~= self.pid then self.timer = false end
  self.pid = pid
  -- The views in two generations: new and used views go to views; when
  -- it holds half of async_max_keys (or of async_max_bytes), old is
  -- forgotten and views becomes old. A forgotten view that owes cost is
  -- still in the queue, which holds the views themselves: nothing owed is
  -- lost; the key's next check asks the store.
  self.views, self.nkeys, self.nbytes = generation(self), 0, 0
  self.old, self.nold = {}, 0
  -- marks[slot]: the generation (bits 24-30, 1 to 127), the sights
  -- before this one (bits 22-23) and the tag (the hash's bits above the
  -- slot's, bits 0-21) of the last key without a view marked in the slot.
  self.marks, self.mark_gen, self.nmarks = ffi.new("int32_t[?]", self.mark_mask + 1), 1, 0
  -- queue[qhead .. qtail]: the views with pending cost to send.
  self.queue, self.qhead, self.qtail = {}, 1, 0
  self.stats = { ["local"] = 0, sync = 0, flushes = 0, flushed = 0, unrecorded = 0, failed = 0,
    first_sight = 0, evicted = 0, dropped = 0 }
end

-- room makes room for a view of bytes in the new generation: when it is
-- full, the old one is forgotten and the new one becomes old.
local function room(self, bytes)
  if self.nkeys >= max(1, self.max_keys / 2) or self.nbytes + bytes > self.max_bytes / 2 then
    self.stats.evicted = self.stats.evicted + self.nold
    self.old, self.nold, self.views, self.nkeys, self.nbytes = self.views, self.nkeys, generation(self), 0, 0
  end
end

-- find returns the view of id, moving it to the new generation.
local function find(self, id)
  local v = self.views[id]
  if v then return v end
  v = self.old[id]
  if not v then return nil end
  self.old[id], self.nold = nil, self.nold - 1
  room(self, v.bytes)
  self.views[id], self.nkeys, self.nbytes = v, self.nkeys + 1, self.nbytes + v.bytes
  return v
end

-- SIGHTS is the sight of a key (1 to 5) from which its answers become
-- its view: the keys seen fewer times within the marks' two generations
-- are decided as in sync mode, at its cost. 5, the most the marks count:
-- spread traffic (100,000 tokens, each seen every few seconds) then makes
-- a handful of views per worker, where the third sight made a thousand
-- that decided 0.5% of its checks and cost more than they saved (their
-- flushes, their tables); a key checked often reaches its fifth sight in
-- a fraction of a second (docs/bench.md, "nginx module, async").
_M.SIGHTS = 5

local crc32 = ngx.crc32_short
local TAG, COUNT_SHIFT, GEN_SHIFT, GENS = 0x3fffff, 22, 24, 127

-- sighted reports whether id reaches its SIGHTS-th sight with this one,
-- counting the sights marked in the marks' current generation and the
-- previous one; else it marks one more sight in the current generation.
-- A key without a view is a mark, a number in an array of the worker's:
-- no string held, nothing for the collector to traverse. A view is a
-- dozen tables and strings the collector traverses on every cycle while
-- it lives, and spread traffic (many keys, each seen every few seconds)
-- would fill the generations with views that few checks reuse: a key
-- seen a few times is no sign of more, a key seen five times in a short
-- while is. Marks advance a generation every max_keys/2 sights
-- marked. Two ids may share a slot: one's mark then overwrites the
-- other's (its view waits for more sights), or, for the same tag (one in
-- 2^22), a key gets its view sooner; neither changes a decision.
local function sighted(self, id)
  local h = crc32(id)
  local slot, tag = band(h, self.mark_mask), band(rshift(h, self.mark_bits), TAG)
  local marks, gen = self.marks, self.mark_gen
  local e = marks[slot]
  local sights = 1
  if band(e, TAG) == tag then
    local g = rshift(e, GEN_SHIFT)
    if g == gen or g == (gen == 1 and GENS or gen - 1) then sights = band(rshift(e, COUNT_SHIFT), 3) + 2 end
  end
  if sights >= _M.SIGHTS then return true end
  marks[slot] = bor(lshift(gen, GEN_SHIFT), lshift(sights - 1, COUNT_SHIFT), tag)
  local n = self.nmarks + 1
  if n >= max(1, self.max_keys / 2) then
    self.mark_gen, n = gen == GENS and 1 or gen + 1, 0
  end
  self.nmarks = n
  return false
end

-- add makes the view of identity id for c.
local function add(self, id, c)
  local bytes = VIEW_BYTES
  for i = 1, #c.hits do bytes = bytes + #c.hits[i].key + #c.hits[i].zone end
  room(self, bytes)
  local window = c.hits[1].limit.window
  for i = 2, #c.hits do window = min(window, c.hits[i].limit.window) end
  -- Every field in the constructor: one allocation of the right size.
  local v = { check = c, bytes = bytes, pending = 0, inflight = 0, parts = false, sending = false,
    window = window / 1e6, at = 0, retry_at = 0, hits = false, blind = false, budget = 0,
    queued = false, plan = false }
  self.views[id], self.nkeys, self.nbytes = v, self.nkeys + 1, self.nbytes + bytes
  return v
end

-- owe adds cost admitted at now to v's pending cost, in parts of one
-- interval each, so that a flush that keeps failing can drop what is older
-- than a window and only that.
local function owe(self, v, cost, now)
  v.pending = v.pending + cost
  local parts = v.parts
  if not parts then
    v.parts = { { at = now, cost = cost } }
    return
  end
  local last = parts[#parts]
  if last and now - last.at < self.interval then
    last.cost = last.cost + cost
  else
    parts[#parts + 1] = { at = now, cost = cost }
  end
end

local function enqueue(self, v)
  if not v.queued then
    v.queued = true
    local t = self.qtail + 1
    self.queue[t], self.qtail = v, t
  end
end

-- set_view takes decision d, the store's answer at now, as v's view: its
-- hits, and the time before which a unit cannot pass: the store's
-- RetryAfter when it denies; when it allows but leaves less than a unit on
-- a sliding window, the time that window's estimate takes to free a unit
-- (it decays by at most Rate per Window); else now.
local function set_view(v, d, now)
  v.at, v.blind, v.hits, v.retry_at = now, false, d.hits, now
  if not d.allowed then
    v.retry_at = now + d.retry_after / 1e6
    return
  end
  for i, h in ipairs(v.check.hits) do
    local l, s = h.limit, d.hits[i]
    if l.code == "w" and not s.shadow and s.used + 1 > l.rate then
      v.retry_at = max(v.retry_at, now + (s.used + 1 - l.rate) * l.window / l.rate / 1e6)
    end
  end
end

local flush

local function ensure_timer(self)
  -- A worker's timer is started by its own first check (timers cannot be
  -- made in init_by_lua): once it runs, this worker's state is its own.
  if self.timer then return end
  if self.pid ~= ngx.worker.pid() then self:reset_worker() end
  local ok, err = ngx.timer.every(self.interval, flush, self)
  if not ok then
    ngx.log(ngx.ERR, "sluice: async: cannot start the flush timer: ", err)
    return
  end
  self.timer = true
end

-- usable reports whether view v decides a check of cost at now.
local function usable(self, v, cost, now)
  return now - v.at <= self.max_view_age and not (v.blind and v.pending + v.inflight + cost > v.budget)
end

-- from_view decides a check of cost on view v at now, or returns nil
-- when only the store can: the cost fits no share here while the store
-- may still admit it. A worker's share of a hit is floor(R/P), R what
-- remained at the last answer: the P workers' shares add up to at most R,
-- so that rounding never admits what the store would not (rounded up, a
-- key held at its limit, R = 1 each time a unit frees, would be admitted
-- once by every worker: P times its rate). A check that does not fit is
-- denied here when the store would deny it too (R less its cost, no later answer
-- possible before RetryAfter) or when this worker owes cost the store has
-- not seen (the next flush answers within an interval); else the store
-- decides it, knowing all that was admitted here.
local function from_view(self, v, cost, now)
  local c, P = v.check, self.processes or ngx.worker.count()
  local owed = v.pending + v.inflight
  local ask, deny = false, false
  local d = { source = "local-view", hits = {} }
  for i, h in ipairs(c.hits) do
    local s = v.hits[i]
    local shadow = (c.shadow or h.limit.shadow) and true or false
    local fits = v.blind or owed + cost <= floor(s.remaining / P)
    if not fits and not shadow then
      if owed == 0 and (s.remaining >= cost or now >= v.retry_at) then ask = true else deny = true end
    end
    d.hits[i] = {
      allowed = fits, shadow = shadow, used = s.used + owed,
      remaining = max(0, s.remaining - owed),
      retry_after = fits and 0 or max(s.retry_after, self.interval * 1e6), reset_after = s.reset_after,
    }
  end
  if ask and not deny then return nil end
  self.lim.conclude(d)
  if d.allowed then
    owe(self, v, cost, now)
    for _, h in ipairs(d.hits) do
      h.used, h.remaining = h.used + cost, max(0, h.remaining - cost)
    end
    enqueue(self, v)
  end
  self.stats["local"] = self.stats["local"] + 1
  return d
end

-- blind makes the first-sight view of c and admits it: nothing is known
-- of the key, its cost goes to the store with the next flush.
local function blind(self, id, c, now)
  local v = add(self, id, c)
  v.blind, v.at, v.budget, v.hits = true, now, self.first_sight, {}
  local d = { source = "local-view", allowed = true, shadowed = false, retry_after = 0, hits = {} }
  for i, h in ipairs(c.hits) do
    local rate = h.limit.rate
    v.budget = min(v.budget, rate)
    v.hits[i] = { remaining = rate, used = 0, retry_after = 0, reset_after = 0 }
    d.hits[i] = { allowed = true, shadow = (c.shadow or h.limit.shadow) and true or false, used = c.cost,
      remaining = rate - c.cost, retry_after = 0, reset_after = h.limit.window }
  end
  owe(self, v, c.cost, now)
  enqueue(self, v)
  self.stats.first_sight = self.stats.first_sight + 1
  return d
end

-- decide_one decides, when it can without the check's tables, a check of
-- cost 1 of one limit l on key in zone, without group or shadow, whose
-- identity is id: the decision; or nil and the key's view if any (false),
-- to pass to decide with the check.
function _M.decide_one(self, l, zone, key, id)
  ensure_timer(self)
  local now = ngx.now()
  local v = find(self, id)
  if v then
    if usable(self, v, 1, now) then
      local d = from_view(self, v, 1, now)
      if d then return d end
    end
  elseif self.first_sight > 0 and l.rate >= 1 then
    return blind(self, id, { hits = { { zone = zone, key = key, limit = l } }, cost = 1, shadow = false }, now)
  end
  return nil, v or false
end

-- decide decides c (valid, cost > 0, Redis's clock); id is its identity
-- (edge's fingerprint at cost 1) when the caller has it; looked, when
-- decide_one looked id up already and found view v (false: none) that
-- cannot decide c.
function _M.decide(self, c, id, looked, v)
  ensure_timer(self)
  id = id or self.edge:fingerprint(c, 1)
  local now = ngx.now()
  if not looked then
    v = find(self, id)
    if v and usable(self, v, c.cost, now) then
      local d = from_view(self, v, c.cost, now)
      if d then return d end
    end
  end
  if not v and c.cost <= self.first_sight then
    local fits = true
    for _, h in ipairs(c.hits) do fits = fits and c.cost <= h.limit.rate end
    if fits then return blind(self, id, c, now) end
  end
  -- No usable view, or a first-sight budget spent: the store decides. Cost
  -- admitted on first sight and not yet sent is unknown to it: at most
  -- first_sight, the bound above.
  self.stats.sync = self.stats.sync + 1
  local seen = v or sighted(self, id)
  local d, err = self.edge:guarded(c)
  if not d then return nil, err end
  if d.source ~= "store" or not seen then return d end
  -- A view other checks of the key made while this one waited, else one.
  v = v or self.views[id] or add(self, id, c)
  set_view(v, d, now)
  return d
end

-- failed keeps v's cost owed after a flush that failed, but for what was
-- admitted more than a window ago (the smallest of the check's), which no
-- longer counts against the limit.
local function failed(self, v, now)
  local kept, parts = 0, {}
  for _, part in ipairs(v.sending or {}) do
    if now - part.at > v.window then
      self.stats.dropped = self.stats.dropped + part.cost
    else
      kept, parts[#parts + 1] = kept + part.cost, part
    end
  end
  for _, part in ipairs(v.parts or {}) do parts[#parts + 1] = part end
  v.pending, v.inflight, v.parts, v.sending = v.pending + kept, 0, parts, false
  self.stats.failed = self.stats.failed + 1
end

-- send decides, in one batched call, the checks of views vs with costs
-- and takes the answers. It returns the views the
-- store denied that can still record some of their cost, and that cost.
local function send(self, vs, costs)
  local checks, plans = {}, {}
  for k, v in ipairs(vs) do
    local c = v.check
    checks[k] = { hits = c.hits, group = c.group, shadow = c.shadow, cost = costs[k] }
    -- The view's calls (state keys, specs): made on its first flush.
    local p = v.plan
    if not p then
      p = self.lim:plan_of(c)
      v.plan = p
    end
    plans[k] = p
  end
  local ds, errs = self.lim:check_batch(checks, plans)
  local now = ngx.now()
  local again, again_costs = {}, {}
  for k, v in ipairs(vs) do
    local d, cost = ds[k], costs[k]
    if not d then
      failed(self, v, now)
      enqueue(self, v) -- sent again next round
      if k == 1 then ngx.log(ngx.WARN, "sluice: async flush failed: ", errs[k]) end
    elseif d.allowed then
      set_view(v, d, now)
      v.inflight, v.sending = 0, false
      self.stats.flushed = self.stats.flushed + cost
    else
      -- Denied: nothing recorded. Record what remains, count the rest.
      local r = cost
      for _, h in ipairs(d.hits) do
        if not h.shadow then r = min(r, h.remaining) end
      end
      self.stats.unrecorded = self.stats.unrecorded + cost - r
      if r > 0 then
        again[#again + 1], again_costs[#again_costs + 1] = v, r
        local newest = v.sending and v.sending[#v.sending]
        v.inflight, v.sending = r, { { at = newest and newest.at or now, cost = r } }
      else
        v.inflight, v.sending = 0, false
      end
      set_view(v, d, now)
      for _, h in ipairs(d.hits) do h.remaining = 0 end
    end
  end
  return again, again_costs
end

-- round sends the views queued when it starts, FLUSH_MAX at most: their
-- pending cost; one call of lim.MAX_BATCH checks at a time.
-- Views queued meanwhile (and those whose call failed) wait for the next
-- round.
function _M.round(self)
  local queue, per = self.queue, min(_M.FLUSH_BATCH, self.lim.MAX_BATCH)
  local last = min(self.qtail, self.qhead + _M.FLUSH_MAX - 1)
  local vs, costs = {}, {}
  while self.qhead <= last do
    local v = queue[self.qhead]
    queue[self.qhead], self.qhead = nil, self.qhead + 1
    v.queued = false
    local cost = v.pending
    if cost > 0 then
      v.inflight, v.pending = cost, 0
      v.sending, v.parts = v.parts, false
    end
    if cost > 0 then
      vs[#vs + 1], costs[#costs + 1] = v, cost
    end
    if #vs == per or (#vs > 0 and self.qhead > last) then
      local again, again_costs = send(self, vs, costs)
      if #again > 0 then send(self, again, again_costs) end
      vs, costs = {}, {}
      -- The requests whose events came with the answer run before the
      -- next call is built; not while the worker exits, whose last round
      -- sends what is owed without waiting on a timer.
      if not ngx.worker.exiting() then ngx.sleep(0) end
    end
  end
  if self.qhead > self.qtail then self.queue, self.qhead, self.qtail = {}, 1, 0 end
  self.stats.flushes = self.stats.flushes + 1
end

-- flush is the worker's timer: it sends the queue.
flush = function(premature, self)
  if self.pid ~= ngx.worker.pid() then return end
  -- One round at a time: ngx.timer.every fires again while a slow round
  -- is still sending, and two rounds would share the keys' in-flight cost.
  if self.flushing or self.qhead > self.qtail then return end
  self.flushing = true
  local ok, err = pcall(_M.round, self)
  self.flushing = false
  if not ok then ngx.log(ngx.ERR, "sluice: async flush round failed: ", err) end
end

return _M
