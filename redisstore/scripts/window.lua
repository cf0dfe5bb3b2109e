-- window.lua: sliding-window (Cloudflare's two counters), algo.Window.
-- State: one string "<index>:<cur>:<prev>": the aligned window index i of
-- cur (window i covers [i·W, (i+1)·W) µs), the cost recorded in window i and
-- in window i−1. Used = prev·(W − elapsed)/W + cur. O(1).

-- window_at mirrors algo.Window.at: a clock behind the state's window reads
-- as the start of that window.
local function window_at(s, p, now)
  local i = floordiv(now, p.window)
  local e = now - i * p.window
  if i < s.index then return s.index, s.prev, s.cur, 0 end
  if i == s.index then return i, s.prev, s.cur, e end
  if i == s.index + 1 then return i, s.cur, 0, e end
  return i, 0, 0, e
end

local function window_used(prev, cur, e, w)
  return prev * (w - e) / w + cur
end

-- window_retry mirrors algo.windowRetry.
local function window_retry(prev, cur, e, w, rate, cost)
  local left = w - e
  local room = rate - cur - cost
  if prev > 0 and room >= 0 then
    local t = left - room * w / prev
    if t < left then return ceil_us(t) end
  end
  if cur + cost <= rate then return left end
  return left + ceil_us(w - (rate - cost) * w / cur)
end

local function window_reset(prev, cur, e, w)
  if cur > 0 then return 2 * w - e end
  if prev > 0 then return w - e end
  return 0
end

ALGOS['w'] = {
  load = function(key, p)
    local v = redis.call('GET', key)
    local s = {index = 0, cur = 0, prev = 0}
    if v then
      local i, c, pr = string.match(v, '^(-?%d+):(%d+):(%d+)$')
      if i then s.index, s.cur, s.prev = tonumber(i), tonumber(c), tonumber(pr) end
    end
    return s
  end,
  eval = function(s, p, now, cost)
    local _, prev, cur, e = window_at(s, p, now)
    local used = window_used(prev, cur, e, p.window)
    local reset = window_reset(prev, cur, e, p.window)
    if fits(used, cost, p.rate) then return true, used, 0, reset end
    return false, used, window_retry(prev, cur, e, p.window, p.rate, cost), reset
  end,
  record = function(s, p, now, cost)
    local i, prev, cur, e = window_at(s, p, now)
    s.index, s.prev, s.cur = i, prev, cur + cost
    return window_used(s.prev, s.cur, e, p.window), window_reset(s.prev, s.cur, e, p.window)
  end,
  save = function(key, s, p, ttl)
    redis.call('SET', key, string.format('%d:%d:%d', s.index, s.cur, s.prev), 'PX', ttl)
  end,
  -- refund takes cost back from the window of `at` if it is still kept.
  refund = function(key, p, at, cost)
    local s = ALGOS['w'].load(key, p)
    local i = floordiv(at, p.window)
    if i == s.index then s.cur = math.max(0, s.cur - cost)
    elseif i == s.index - 1 then s.prev = math.max(0, s.prev - cost)
    else return end
    local ttl = redis.call('PTTL', key)
    if ttl > 0 then ALGOS['w'].save(key, s, p, ttl) end
  end,
}
