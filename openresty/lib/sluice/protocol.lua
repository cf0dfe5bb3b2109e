-- sluice.protocol: decide.lua's arguments and reply, as redisstore encodes
-- and decodes them (redisstore/protocol.go), and each hit's result computed
-- from the state the script read with the formulas of internal/algo (the
-- code the Go stores run), so that a decision here equals the Go store's.
local keys = require "sluice.keys"

local floor, ceil, max, min, exp, log = math.floor, math.ceil, math.max, math.min, math.exp, math.log
local ldexp = math.ldexp
local itoa = keys.itoa

local _M = {}

local DECAY_ZERO = 0.01

-- snap_len is the length of a hit's part of the reply: fits, then its
-- algorithm's snapshot.
local function snap_len(sp)
  if sp.code == "g" then return 3 end
  if sp.code == "b" then return 3 + sp.window / sp.bucket end
  return 4
end
_M.snap_len = snap_len

-- spec returns what the scripts are told of limit l (code, rate, window,
-- bucket, shadow) with its arguments as strings, kept on l while they
-- stay the same: made once per limit, not per check. Read only.
function _M.spec(l, shadow)
  local k = shadow and "spec_shadow" or "spec"
  local sp = l[k]
  if sp and sp.code == l.code and sp.rate == l.rate and sp.window == l.window and sp.bucket == l.bucket then
    return sp
  end
  sp = { code = l.code, rate = l.rate, window = l.window, bucket = l.bucket, shadow = shadow,
    a_rate = itoa(l.rate), a_window = itoa(l.window), a_bucket = itoa(l.bucket), a_shadow = shadow and "1" or "0" }
  l[k] = sp
  return sp
end

-- encode returns decide.lua's KEYS and ARGV for calls (each one check's
-- hits in one slot: {keys, specs, cost}): now ("" for the server's TIME),
-- padding, id, the distinct limits, then per check cost, hit count, limit
-- numbers.
function _M.encode(now, padding, id, calls)
  local ks, limits, refs, nl = {}, {}, {}, 0
  for _, cl in ipairs(calls) do
    for i, sp in ipairs(cl.specs) do
      ks[#ks + 1] = cl.keys[i]
      local k = 0
      for j = 1, nl do
        local o = limits[j]
        if o.code == sp.code and o.rate == sp.rate and o.window == sp.window and o.bucket == sp.bucket and o.shadow == sp.shadow then
          k = j
          break
        end
      end
      if k == 0 then
        nl = nl + 1
        limits[nl], k = sp, nl
      end
      refs[#refs + 1] = k
    end
  end
  local args = { now or "", padding, id, nl }
  for j = 1, nl do
    local sp = limits[j]
    local n = #args
    if sp.a_rate then
      args[n + 1], args[n + 2], args[n + 3], args[n + 4], args[n + 5] =
          sp.code, sp.a_rate, sp.a_window, sp.a_bucket, sp.a_shadow
    else
      args[n + 1], args[n + 2], args[n + 3], args[n + 4], args[n + 5] =
          sp.code, itoa(sp.rate), itoa(sp.window), itoa(sp.bucket), sp.shadow and "1" or "0"
    end
  end
  local r = 0
  for _, cl in ipairs(calls) do
    args[#args + 1] = itoa(cl.cost)
    args[#args + 1] = #cl.specs
    for _ = 1, #cl.specs do
      r = r + 1
      args[#args + 1] = refs[r]
    end
  end
  return ks, args
end

-- decode splits raw, decide.lua's reply for calls, into one reply per call:
-- {allowed, now, hits = {{fits, snap}}}, or false for a check the script
-- failed on alone. Any deviation is an error, never a guess.
function _M.decode(raw, calls)
  if type(raw) ~= "table" or type(raw[1]) ~= "number" or raw[1] <= 0 then
    return nil, "decide script replied no time first"
  end
  local now, off, out = raw[1], 2, {}
  for c, cl in ipairs(calls) do
    local n = 1
    for _, sp in ipairs(cl.specs) do n = n + snap_len(sp) end
    if off + n - 1 > #raw then return nil, "decide script replied too few values for its checks" end
    local a = raw[off]
    if a == -1 then
      out[c] = false
    elseif a == 0 or a == 1 then
      local r = { allowed = a == 1, now = now, hits = {} }
      local k = off + 1
      for i, sp in ipairs(cl.specs) do
        local f = raw[k]
        if f ~= 0 and f ~= 1 then return nil, "decide script: fits is " .. tostring(f) end
        local m = snap_len(sp)
        local snap = {}
        for j = 1, m - 1 do
          local v = raw[k + j]
          if type(v) ~= "number" then return nil, "decide script: a snapshot value is not an integer" end
          snap[j] = v
        end
        r.hits[i] = { fits = f == 1, snap = snap }
        k = k + m
      end
      out[c] = r
    else
      return nil, "decide script: allowed is " .. tostring(a)
    end
    off = off + n
  end
  if off ~= #raw + 1 then return nil, "decide script replied more values than its checks" end
  return out
end

-- The formulas of internal/algo, on the snapshot decide.lua replied.

local function floordiv(a, b)
  local q = floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local function floormod(a, n)
  return a - floordiv(a, n) * n
end

local function fits(used, cost, rate)
  return used + cost <= rate + 1e-9 + 1e-12 * rate
end

local function ceil_micros(t)
  if t <= 0 then return 0 end
  return ceil(t)
end

-- remaining is algo.Remaining: floor(rate - used), at least 0.
local function remaining(rate, used)
  local r = floor(rate - used + 1e-9 + 1e-12 * rate)
  if r < 0 then return 0 end
  return r
end
_M.remaining = remaining

-- Window (algo.Window): snapshot idx, cur, prev.
local function window_at(s, w, now)
  local idx, cur, prev = s[1], s[2], s[3]
  local i = floordiv(now, w)
  local e = now - i * w
  if i < idx then return idx, prev, cur, 0
  elseif i == idx then return i, prev, cur, e
  elseif i == idx + 1 then return i, cur, 0, e end
  return i, 0, 0, e
end

local function window_reset(prev, cur, e, w)
  if cur > 0 then return 2 * w - e end
  if prev > 0 then return w - e end
  return 0
end

local function window_retry(prev, cur, e, w, rate, cost)
  local left = w - e
  local room = rate - cur - cost
  if prev > 0 and room >= 0 then
    local t = left - room * w / prev
    if t < left then return ceil_micros(t) end
  end
  if cur + cost <= rate then return left end
  return left + ceil_micros(w - (rate - cost) * w / cur)
end

local function window_eval(sp, s, now, cost, recorded)
  local w = sp.window
  local _, prev, cur, e = window_at(s, w, now)
  local used = prev * (w - e) / w + cur
  local reset, retry = window_reset(prev, cur, e, w), 0
  if not fits(used, cost, sp.rate) then retry = window_retry(prev, cur, e, w, sp.rate, cost) end
  if recorded then
    cur = cur + cost
    used, reset = prev * (w - e) / w + cur, window_reset(prev, cur, e, w)
  end
  return used, retry, reset
end

-- GCRA (algo.GCRA): snapshot tat, frac.
local function muldiv(a, b, m)
  local p = a * b
  if p < 9007199254740992 then
    local q = floordiv(p, m)
    return q, p - q * m
  end
  local ah, al = floor(a / 65536), a % 65536
  p = ah * b
  local q1 = floordiv(p, m)
  p = (p - q1 * m) * 65536 + al * b
  local q2 = floordiv(p, m)
  return q1 * 65536 + q2, p - q2 * m
end

local function gcra_advance(sp, q, r, cost)
  local rate = sp.rate
  local dq, dr = muldiv(cost, floormod(sp.window, rate), rate)
  q, r = q + cost * floordiv(sp.window, rate) + dq, r + dr
  if r >= rate then q, r = q + 1, r - rate end
  return q, r
end

local function gcra_used(sp, q, r, now)
  return ((q - now) * sp.rate + r) / sp.window
end

local function gcra_wait(q, r, now)
  if r > 0 then q = q + 1 end
  return max(0, q - now)
end

local function gcra_eval(sp, s, now, cost, recorded)
  local q, r = now, 0
  if s[1] >= now then q, r = s[1], min(s[2], sp.rate - 1) end
  local used, reset, retry = gcra_used(sp, q, r, now), gcra_wait(q, r, now), 0
  local q1, r1 = gcra_advance(sp, q, r, cost)
  local e = now + sp.window
  if not (q1 < e or (q1 == e and r1 == 0)) then retry = gcra_wait(q1, r1, e) end
  if recorded then used, reset = gcra_used(sp, q1, r1, now), gcra_wait(q1, r1, now) end
  return used, retry, reset
end

-- Decay (algo.Decay): snapshot m, x, t with s = m·2^(x−53).
local function decay_wait(sp, from, to)
  if from <= to then return 0 end
  return ceil_micros(sp.window * log(from / to))
end

local function decay_eval(sp, s, now, cost, recorded)
  local v, t0 = 0, s[3]
  if s[1] ~= 0 then v = ldexp(s[1], s[2] - 53) end
  if now > t0 then v = v * exp(-(now - t0) / sp.window) end
  if v < DECAY_ZERO then v = 0 end
  local used, reset, retry = v, decay_wait(sp, v, DECAY_ZERO), 0
  if not fits(v, cost, sp.rate) then retry = decay_wait(sp, v, max(sp.rate - cost, DECAY_ZERO)) end
  if recorded then
    used = v + cost
    reset = decay_wait(sp, used, DECAY_ZERO)
  end
  return used, retry, reset
end

-- Buckets (algo.Buckets): snapshot head (0 when missing), then the ring.
local function buckets_state(s)
  if s[1] == 0 then return 0, {} end
  local ring = {}
  for j = 2, #s do ring[j - 1] = s[j] end
  return s[1], ring
end

local function bcount(head, ring, k)
  local n = #ring
  if n == 0 or k > head or k <= head - n then return 0 end
  return ring[floormod(k, n) + 1]
end

local function buckets_used(sp, head, ring, b, e)
  local n, r = sp.window / sp.bucket, sp.bucket
  local sum = 0
  for k = b - n + 1, b do sum = sum + bcount(head, ring, k) end
  return bcount(head, ring, b - n) * (r - e) / r + sum
end

local function buckets_at(sp, head, ring, now)
  local b = floordiv(now, sp.bucket)
  if #ring > 0 and b < head then return head, 0 end
  return b, now - b * sp.bucket
end

local function buckets_reset(sp, head, ring, now)
  local n = sp.window / sp.bucket
  for k = head, head - #ring + 1, -1 do
    if bcount(head, ring, k) > 0 then return max(0, (k + n + 1) * sp.bucket - now) end
  end
  return 0
end

local function buckets_retry(sp, head, ring, b, e, cost)
  local n, r = sp.window / sp.bucket, sp.bucket
  local rest = 0
  for k = b - n + 1, b do rest = rest + bcount(head, ring, k) end
  local k = b
  while true do
    if k > b then rest = rest + bcount(head, ring, k) - bcount(head, ring, k - n) end
    local start = 0
    if k == b then start = e end
    local old = bcount(head, ring, k - n)
    local room = sp.rate - rest - cost
    if room >= 0 then
      local at = start
      if old > 0 then at = max(at, r - room * r / old) end
      if at < r then return ceil_micros((k - b) * r - e + at) end
    end
    k = k + 1
  end
end

local function buckets_eval(sp, s, now, cost, recorded)
  local head, ring = buckets_state(s)
  local b, e = buckets_at(sp, head, ring, now)
  local used, reset, retry = buckets_used(sp, head, ring, b, e), buckets_reset(sp, head, ring, now), 0
  if not fits(used, cost, sp.rate) then retry = buckets_retry(sp, head, ring, b, e, cost) end
  if recorded then
    local n = sp.window / sp.bucket
    if #ring ~= n + 1 then
      ring = {}
      for j = 1, n + 1 do ring[j] = 0 end
      head = floordiv(now, sp.bucket)
    end
    b, e = buckets_at(sp, head, ring, now)
    if b > head then
      for k = head + 1, min(b, head + n + 1) do ring[floormod(k, n + 1) + 1] = 0 end
      head = b
    end
    local slot = floormod(b, n + 1) + 1
    ring[slot] = ring[slot] + cost
    used, reset = buckets_used(sp, head, ring, b, e), buckets_reset(sp, head, ring, now)
  end
  return used, retry, reset
end

-- Log: log.lua computes used, retry_after and the newest event's time.
local function log_eval(sp, s, now, cost, recorded)
  local used, retry, newest, reset = s[1], s[2], s[3], 0
  if newest > 0 then reset = max(0, newest + sp.window - now) end
  if recorded then used, reset = used + cost, max(now, newest) + sp.window - now end
  return used, retry, reset
end

local EVAL = { w = window_eval, g = gcra_eval, d = decay_eval, b = buckets_eval, l = log_eval }

-- result is one hit's result (redisstore's result): allowed, shadow, used,
-- remaining, retry_after and reset_after in µs. recorded tells whether the
-- check's cost was recorded on the hit.
function _M.result(sp, hr, now, cost, recorded)
  local used, retry, reset = EVAL[sp.code](sp, hr.snap, now, cost, recorded)
  if hr.fits then
    retry = 0
  elseif retry == 0 then
    retry = 1 -- decay at its boundary: Lua's exp and Go's differ by an ulp
  end
  return {
    allowed = hr.fits, shadow = sp.shadow, used = used, remaining = remaining(sp.rate, used),
    retry_after = retry, reset_after = reset,
  }
end

-- recorded_at is algo.RecordedAt on a snapshot: where decide.lua put the
-- cost, for refund.lua.
function _M.recorded_at(sp, snap, now)
  if sp.code == "w" then return max(now, snap[1] * sp.window) end
  if sp.code == "b" and snap[1] ~= 0 then return max(now, snap[1] * sp.bucket) end
  return now
end

return _M
