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
-- store synchronously, through the breaker and the failure policy; with
-- first_sight, a key without a view is admitted here up to first_sight
-- while its cost goes with the next flush (edge.Async's FirstSight): for a
-- check of one hit, as two numbers per identity and a flat record sent
-- with record.lua (one integer of reply), no view (a unit recorded gives
-- its cost back to the entry's first-sight budget, a unit refused spends
-- the budget for the sighting: at most first_sight unconfirmed); the store's answer
-- allowing such a check, once its first-sight budget is spent, is kept
-- in the same entry (what remained, R), and the key's next checks are
-- admitted as records within ceil(R/P), the views' share. A
-- full table evicts its oldest views that owe nothing and deny nothing. A
-- flush that fails keeps the cost owed, but for what was admitted more
-- than a window ago, which is dropped (stats.dropped).
--
-- Over-admission: a worker admits at most its budget ceil(R/P) between two
-- answers about an identity, R what remained at the last answer, P the
-- `processes` option; and at most what it admits in a round, λ·(T + 2L)
-- for a local rate λ, interval T and flush latency L. For N workers in the
-- fleet sharing a key that fills: over-admission <= N·min(ceil(Rate/P),
-- λ·(T + 2L)), plus N·first_sight per key and sighting with first sight
-- on; with P = N about one Rate at worst. (A record admitted within an
-- answer's share that does not fit is counted unrecorded, as a view's
-- flush that the store denies.) A flush the store
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
    first_sight = opts.first_sight or 0,
  }, mt)
  if self.interval < 0.001 then return nil, "sync_interval must be >= 1 ms" end
  if type(self.first_sight) ~= "number" or self.first_sight < 0 or self.first_sight ~= math.floor(self.first_sight) then
    return nil, "first_sight must be an integer >= 0"
  end
  self:reset_worker()
  return self
end

-- reset_worker starts this worker's state: a limiter made in init_by_lua
-- is forked into every worker, each with views and a timer of its own.
function _M.reset_worker(self)
  local pid = ngx.worker and ngx.worker.pid and ngx.worker.pid() or 0
  -- The timer is the worker's: kept by a reset in the worker that runs it
  -- (lim:reset), else a second one would be started.
  if pid ~= self.pid then self.timer = false end
  self.pid = pid
  self.views, self.nkeys, self.nbytes, self.queue = {}, 0, 0, {}
  -- order holds the views in the order they were made (order[head ..
  -- tail]): a full table evicts the oldest that owes nothing.
  self.order, self.head, self.tail = {}, 1, 0
  self.stats = { ["local"] = 0, sync = 0, flushes = 0, flushed = 0, unrecorded = 0, failed = 0, full = 0,
    first_sight = 0, evicted = 0, dropped = 0 }
  -- First sight of a one-hit check, without a view: per identity, the
  -- cost admitted on first sight in its window and the window's end (two
  -- numbers, no table), at most max_keys of them; and the records to send,
  -- flat arrays: state key, limit spec, slot, cost, time, window (s).
  -- An entry that holds the store's answer to the key's last check (see
  -- keep_answer) has a third number, what remained then (fs_rem).
  self.fs_used, self.fs_until, self.fs_at, self.fs_rem, self.nfirst = {}, {}, {}, {}, 0
  -- The identities in the order they were admitted on first sight
  -- (fo_id[fo_head .. fo_tail], with the time): a full table forgets the
  -- oldest whose records are all in the store (admitted before sent_at).
  self.fo_id, self.fo_at, self.fo_head, self.fo_tail, self.sent_at = {}, {}, 1, 0, 0
  self.rk, self.rspec, self.rslot, self.rcost, self.rat, self.rwin, self.nrec = {}, {}, {}, {}, {}, {}, 0
  -- Per record, its entry's identity and sighting (the entry's window
  -- end, false for an entry holding an answer): the record's outcome is
  -- taken back into the entry it was admitted from (see send_records).
  self.rid, self.rgen = {}, {}
end

-- FIRST_EVICT_TRIES bounds the entries a new first sight looks at to
-- make room.
local FIRST_EVICT_TRIES = 8

-- FIRST_BYTES is the fixed cost counted per first-sight entry and record,
-- beyond its strings.
local FIRST_BYTES = 160

-- forget_first removes the first-sight entry of id.
local function forget_first(self, id)
  self.fs_used[id], self.fs_until[id], self.fs_at[id], self.fs_rem[id] = nil, nil, nil, nil
  self.nfirst, self.nbytes = self.nfirst - 1, self.nbytes - #id - FIRST_BYTES
end

-- evict_first forgets the oldest first-sight entry whose records are all
-- in the store, looking at EVICT_TRIES entries at most; it reports whether
-- it did. Its key's next check is a new sighting: what the bound counts.
local function evict_first(self)
  for _ = 1, FIRST_EVICT_TRIES do
    local k = self.fo_head
    if k > self.fo_tail then
      self.fo_id, self.fo_at, self.fo_head, self.fo_tail = {}, {}, 1, 0
      return false
    end
    local id, at = self.fo_id[k], self.fo_at[k]
    -- Only the latest admission of id counts; older ones are stale.
    local latest = self.fs_at[id] == at
    if latest and at >= self.sent_at then return false end -- a record not in the store yet
    self.fo_id[k], self.fo_at[k], self.fo_head = nil, nil, k + 1
    if latest then
      forget_first(self, id)
      self.stats.evicted = self.stats.evicted + 1
      return true
    end
  end
  return false
end

-- first decides c on first sight, for a one-hit check without a view: it
-- is admitted here while the cost admitted on first sight on its identity
-- in this window stays within min(first_sight, rate), and becomes a record
-- sent with the next round (record.lua, one integer of reply). It returns
-- nil when c is not for first sight (the store decides). c is given by
-- its parts: the hit's limit l, zone and key, the check's group, cost and
-- shadow flag (access's common case makes no check table for it).
local function first(self, l, zone, key, group, cost, shadow, id, now)
  if cost > l.rate or shadow or l.shadow then return nil end
  local used = self.fs_used[id]
  if used and self.fs_until[id] <= now then
    -- The window of the last sighting is over (or its answer too old):
    -- a new sighting.
    forget_first(self, id)
    used = nil
  end
  -- An entry holding the store's answer admits this worker's share of
  -- what remained then, as a view would; else the first-sight budget.
  local rem = used and self.fs_rem[id]
  local budget = rem and ceil(rem / (self.processes or ngx.worker.count())) or min(self.first_sight, l.rate)
  if (used or 0) + cost > budget or self.nrec >= self.max_keys then return nil end
  local skey, spec, slot = self.lim:record_key_of(zone, key, group, l, shadow)
  local bytes = #skey + FIRST_BYTES
  if not used then bytes = bytes + #id + FIRST_BYTES end
  while self.nbytes + bytes > self.max_bytes or (not used and self.nfirst >= self.max_keys) do
    if not evict_first(self) then
      self.stats.full = self.stats.full + 1
      return nil
    end
  end
  if not used then
    self.fs_until[id], self.nfirst = now + l.window / 1e6, self.nfirst + 1
    self.nbytes = self.nbytes + #id + FIRST_BYTES
  end
  used = (used or 0) + cost
  self.fs_used[id], self.fs_at[id] = used, now
  local t = self.fo_tail + 1
  self.fo_id[t], self.fo_at[t], self.fo_tail = id, now, t
  local n = self.nrec + 1
  self.rk[n], self.rspec[n], self.rslot[n], self.rcost[n], self.rat[n], self.rwin[n] =
      skey, spec, slot, cost, now, l.window / 1e6
  self.rid[n], self.rgen[n] = id, not rem and self.fs_until[id]
  self.nrec, self.nbytes = n, self.nbytes + #skey + FIRST_BYTES
  local st = self.stats
  if rem then
    st["local"] = st["local"] + 1
    return { source = "local-view", allowed = true, shadowed = false, retry_after = 0, hits = { {
      allowed = true, shadow = false, used = l.rate - rem + used, remaining = max(0, rem - used), retry_after = 0,
      reset_after = l.window } } }
  end
  st.first_sight = st.first_sight + 1
  return { source = "local-view", allowed = true, shadowed = false, retry_after = 0, hits = { {
    allowed = true, shadow = false, used = used, remaining = max(0, l.rate - used), retry_after = 0,
    reset_after = l.window } } }
end

-- keep_answer keeps d, the store's answer allowing c (one hit, not
-- shadow) at now, in c's first-sight entry (made if need be) instead of a
-- view: three numbers, no table, so that the key's next checks are
-- admitted here within this worker's share of what remained, ceil(R/P),
-- and go to the store as records (record.lua), as first sights do. It
-- reports whether it did (not when the table is full: a view then).
local function keep_answer(self, c, id, d, now)
  local l = c.hits[1].limit
  if c.shadow or l.shadow then return false end
  local used = self.fs_used[id]
  if used and self.fs_until[id] <= now then
    forget_first(self, id)
    used = nil
  end
  if not used then
    local bytes = #id + FIRST_BYTES
    while self.nbytes + bytes > self.max_bytes or self.nfirst >= self.max_keys do
      if not evict_first(self) then
        self.stats.full = self.stats.full + 1
        return false
      end
    end
    self.nfirst, self.nbytes = self.nfirst + 1, self.nbytes + bytes
    -- Its order entry: evicted like a first sight's, once the records
    -- admitted from it are in the store.
    self.fs_at[id] = now
    local t = self.fo_tail + 1
    self.fo_id[t], self.fo_at[t], self.fo_tail = id, now, t
  end
  -- Cost admitted here since is counted from 0: the answer holds the
  -- rest. Usable as long as a view is (max_view_age), within the window.
  self.fs_used[id], self.fs_rem[id] = 0, d.hits[1].remaining
  self.fs_until[id] = now + min(l.window / 1e6, self.max_view_age)
  return true
end

-- EVICT_TRIES bounds the views a new key looks at to make room.
local EVICT_TRIES = 4

-- evict forgets one view that owes nothing and denies nothing, among the
-- oldest few, to make room for a new key; it reports whether it did. A
-- view that denies (it kept the store's denial) is kept: forgetting it
-- would let the key's next check be decided again.
local function evict(self)
  for _ = 1, EVICT_TRIES do
    if self.head > self.tail then
      self.order, self.head, self.tail = {}, 1, 0
      return false
    end
    local v = self.order[self.head]
    self.order[self.head] = nil
    self.head = self.head + 1
    if self.views[v.id] == v then
      local denying = false
      for i = 1, #v.rem do denying = denying or v.rem[i] <= 0 end
      if v.pending == 0 and v.inflight == 0 and not v.queued and not v.blind and not denying then
        self.views[v.id] = nil
        self.nkeys, self.nbytes = self.nkeys - 1, self.nbytes - v.bytes
        self.stats.evicted = self.stats.evicted + 1
        return true
      end
      self.tail = self.tail + 1 -- still needed: to the back
      self.order[self.tail] = v
    end
  end
  return false
end

-- add makes the view of identity id for c, or returns nil when the table
-- is full and no view can be evicted.
local function add(self, id, c)
  local bytes = VIEW_BYTES
  for _, h in ipairs(c.hits) do bytes = bytes + #h.key + #h.zone end
  while self.nkeys >= self.max_keys or self.nbytes + bytes > self.max_bytes do
    if not evict(self) then
      self.stats.full = self.stats.full + 1
      return nil
    end
  end
  local v = { id = id, check = c, bytes = bytes, pending = 0, inflight = 0, rem = {}, used = {}, retry = {},
    reset = {}, parts = {}, window = math.huge }
  for i, h in ipairs(c.hits) do v.window = min(v.window, h.limit.window) end
  self.views[id] = v
  self.nkeys, self.nbytes = self.nkeys + 1, self.nbytes + bytes
  self.tail = self.tail + 1
  self.order[self.tail] = v
  return v
end

-- owe adds cost admitted at now to v's pending cost, in parts of one
-- interval each, so that a flush that keeps failing can drop what is older
-- than a window and only that.
local function owe(self, v, cost, now)
  v.pending = v.pending + cost
  local parts = v.parts
  local last = parts[#parts]
  if last and now - last.at < self.interval then
    last.cost = last.cost + cost
  else
    parts[#parts + 1] = { at = now, cost = cost }
  end
end

local function enqueue(self, id, v)
  if not v.queued then
    v.queued = true
    self.queue[#self.queue + 1] = id
  end
end

-- set_view takes decision d, the store's answer at now, as v's view.
local function set_view(v, d, now)
  v.at, v.blind = now, false
  for i, h in ipairs(d.hits) do
    v.rem[i], v.used[i], v.retry[i], v.reset[i] = h.remaining, h.used, h.retry_after, h.reset_after
  end
end

local flush, send_records

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

-- decide_one decides on first sight, when it can, a check of cost 1 of
-- one limit l on key in zone, without group or shadow, whose identity is
-- id, without the check's tables: the decision, or nil when it needs
-- them (a view, or not for first sight: call decide with tried).
function _M.decide_one(self, l, zone, key, id)
  ensure_timer(self)
  if self.first_sight == 0 or self.views[id] then return nil end
  return first(self, l, zone, key, nil, 1, false, id, ngx.now())
end

-- decide decides c (valid, cost > 0, Redis's clock); id is its identity
-- (edge's fingerprint at cost 1) when the caller has it; tried when
-- decide_one found c not for first sight.
function _M.decide(self, c, id, tried)
  ensure_timer(self)
  id = id or self.edge:fingerprint(c, 1)
  local v = self.views[id]
  local now = ngx.now()
  if v and now - v.at <= self.max_view_age and not (v.blind and v.pending + v.inflight + c.cost > v.budget) then
    v.last = now
    -- A first-sight view has room (checked above: its budget is
    -- first_sight per worker); a view of the store's answer shares what
    -- remained among P deciders.
    local P = self.processes or ngx.worker.count()
    local owed = v.pending + v.inflight
    local d = { source = "local-view", hits = {} }
    for i, h in ipairs(c.hits) do
      local shadow = (c.shadow or h.limit.shadow) and true or false
      local fits = v.blind or owed + c.cost <= ceil(v.rem[i] / P)
      d.hits[i] = {
        allowed = fits, shadow = shadow, used = v.used[i] + owed, remaining = max(0, v.rem[i] - owed),
        retry_after = fits and 0 or max(v.retry[i], self.interval * 1e6), reset_after = v.reset[i],
      }
    end
    self.lim.conclude(d)
    if d.allowed then
      owe(self, v, c.cost, now)
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
  -- First sight: a key without a view is admitted here up to first_sight
  -- (and each limit's rate) while its cost goes to the store with the next
  -- round; what the store then denies is over-admission, counted
  -- unrecorded: at most first_sight per worker and sighting.
  if not v and self.first_sight > 0 and #c.hits == 1 then
    if not tried then
      local h = c.hits[1]
      local d = first(self, h.limit, h.zone, h.key, c.group, c.cost, c.shadow, id, now)
      if d then return d end
    end
  elseif not v and c.cost <= self.first_sight then
    v = add(self, id, c)
    if v then
      v.blind, v.at, v.last, v.budget = true, now, now, self.first_sight
      local d = { source = "local-view", allowed = true, shadowed = false, retry_after = 0, hits = {} }
      for i, h in ipairs(c.hits) do
        -- The fields show what a new key would have: nothing is known.
        local rate = h.limit.rate
        v.budget = min(v.budget, rate)
        v.rem[i], v.used[i], v.retry[i], v.reset[i] = rate, 0, 0, 0
        d.hits[i] = { allowed = true, shadow = (c.shadow or h.limit.shadow) and true or false, used = c.cost,
          remaining = rate - c.cost, retry_after = 0, reset_after = h.limit.window }
      end
      owe(self, v, c.cost, now)
      enqueue(self, id, v)
      self.stats.first_sight = self.stats.first_sight + 1
      return d
    end
  end
  -- No usable view, or a first-sight budget spent: the store decides. Cost
  -- admitted on first sight and not yet sent is unknown to it: at most
  -- first_sight, the bound above.
  self.stats.sync = self.stats.sync + 1
  local d, err = self.edge:guarded(c)
  if not d then return nil, err end
  if d.source ~= "store" then return d end
  -- With first sight, an allowed one-hit check's answer is kept in its
  -- first-sight entry (no view); a denial makes a view, which holds it.
  if not v and self.first_sight > 0 and #c.hits == 1 and d.allowed and keep_answer(self, c, id, d, now) then
    return d
  end
  v = v or add(self, id, c)
  if not v then return d end
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
  for id, t in pairs(self.fs_until) do
    if t <= now then
      forget_first(self, id)
    end
  end
  local fo_id, fo_at, m = {}, {}, 0
  for k = self.fo_head, self.fo_tail do
    local id, at = self.fo_id[k], self.fo_at[k]
    if self.fs_at[id] == at then
      m = m + 1
      fo_id[m], fo_at[m] = id, at
    end
  end
  self.fo_id, self.fo_at, self.fo_head, self.fo_tail = fo_id, fo_at, 1, m
  local order, n = {}, 0
  for k = self.head, self.tail do
    local v = self.order[k]
    if self.views[v.id] == v then
      n = n + 1
      order[n] = v
    end
  end
  self.order, self.head, self.tail = order, 1, n
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
      -- Owed still: sent again next round, but for what was admitted more
      -- than a window ago (the smallest of the check's), which no longer
      -- counts against the limit; the view ages meanwhile.
      local kept, parts = 0, {}
      for _, part in ipairs(v.sending or {}) do
        if now - part.at > v.window / 1e6 then
          self.stats.dropped = self.stats.dropped + part.cost
        else
          kept, parts[#parts + 1] = kept + part.cost, part
        end
      end
      for _, part in ipairs(v.parts) do parts[#parts + 1] = part end
      v.pending, v.inflight, v.parts, v.sending = v.pending + kept, 0, parts, nil
      enqueue(self, id, v)
      self.stats.failed = self.stats.failed + 1
      if k == 1 then ngx.log(ngx.WARN, "sluice: async flush failed: ", errs[k]) end
    elseif d.allowed or costs[k] == 0 then
      set_view(v, d, now)
      v.inflight, v.refresh, v.sending = 0, false, nil
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
        local newest = v.sending and v.sending[#v.sending]
        v.inflight, v.sending = r, { { at = newest and newest.at or now, cost = r } }
      else
        v.inflight, v.sending = 0, nil
      end
      set_view(v, d, now)
      for i in ipairs(d.hits) do v.rem[i] = 0 end
    end
  end
  return again, again_costs
end

-- RECORD_BATCH is the most records of one record.lua call of a flush, as
-- edge.Async sends them: Redis runs a call of 512 for milliseconds, and
-- the checks that go to Redis meanwhile (a key's first answer) wait
-- behind it; calls of 128 keep that wait short.
_M.RECORD_BATCH = 128

-- send_records sends the first-sight records with record.lua: one call per
-- hash slot and up to RECORD_BATCH records (edge.Async's firstBatch), one
-- integer per record. A record that
-- did not fit was admitted over the limit: counted unrecorded. A record
-- whose call failed is sent again next round, but for what was admitted
-- more than its window ago, which no longer counts (dropped).
send_records = function(self)
  local n, rk, rspec, rslot, rcost, rat, rwin = self.nrec, self.rk, self.rspec, self.rslot, self.rcost, self.rat, self.rwin
  local rid, rgen = self.rid, self.rgen
  self.rk, self.rspec, self.rslot, self.rcost, self.rat, self.rwin, self.nrec = {}, {}, {}, {}, {}, {}, 0
  self.rid, self.rgen = {}, {}
  local fs_used, fs_until, fs_rem = self.fs_used, self.fs_until, self.fs_rem
  local start = ngx.now()
  local out, err = self.lim:record_batch(rk, rspec, rslot, rcost, n, _M.RECORD_BATCH)
  local now = ngx.now()
  if not err then self.sent_at = start end
  local st = self.stats
  for j = 1, n do
    local r, cost = out[j], rcost[j]
    self.nbytes = self.nbytes - #rk[j] - FIRST_BYTES
    -- The record's entry, when it is still the sighting it was admitted
    -- in and holds no answer: a unit recorded no longer counts against
    -- its first-sight budget (the store has it); one that did not fit
    -- spends the budget for the rest of the sighting (the store decides).
    local id = rid[j]
    local mine = rgen[j] and fs_until[id] == rgen[j] and not fs_rem[id] and fs_used[id]
    if r == 1 then
      st.flushed = st.flushed + cost
      if mine then fs_used[id] = max(0, mine - cost) end
    elseif r == 0 or r == -1 then
      st.unrecorded = st.unrecorded + cost
      if mine then fs_used[id] = math.huge end
    elseif now - rat[j] > rwin[j] then
      st.dropped = st.dropped + cost
    else
      local m = self.nrec + 1
      self.rk[m], self.rspec[m], self.rslot[m], self.rcost[m], self.rat[m], self.rwin[m] =
          rk[j], rspec[j], rslot[j], cost, rat[j], rwin[j]
      self.rid[m], self.rgen[m] = id, rgen[j]
      self.nrec, self.nbytes = m, self.nbytes + #rk[j] + FIRST_BYTES
    end
  end
  if err then
    st.failed = st.failed + 1
    ngx.log(ngx.WARN, "sluice: async record flush failed: ", err)
  end
end

-- flush is the worker's timer: it sends the queue.
flush = function(premature, self)
  if self.pid ~= ngx.worker.pid() then return end
  -- One round at a time: ngx.timer.every fires again while a slow round
  -- is still sending, and two rounds would share the keys' in-flight cost.
  if self.flushing then return end
  local queue = self.queue
  if #queue == 0 and self.nrec == 0 then return end
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
        v.sending, v.parts = v.parts, {}
        ids[#ids + 1], costs[#costs + 1] = id, v.inflight
      elseif v.refresh then
        ids[#ids + 1], costs[#costs + 1] = id, 0
      end
    end
  end
  self.stats.flushes = self.stats.flushes + 1
  if self.nrec > 0 then send_records(self) end
  local again, again_costs = send(self, ids, costs)
  if #again > 0 then send(self, again, again_costs) end
  local now = ngx.now()
  if not self.swept or now - self.swept > 10 then
    sweep(self, now)
    self.swept = now
  end
end

return _M
