-- buckets.lua: the bucketed sliding window, algo.Buckets. n = W/R buckets
-- of R µs; a ring of n+1 counters, bucket k in slot k mod (n+1).
-- State: one string "<head>:<c0>,<c1>,...,<cn>": the index of the newest
-- bucket and the ring. Used = oldest bucket weighted by the part of it still
-- inside (now − W, now] + the n newer buckets. O(n) per check (n <= 1000).

local function buckets_count(s, k)
  local len = #s.counts
  if len == 0 or k > s.head or k <= s.head - len then return 0 end
  return s.counts[floormod(k, len) + 1]
end

local function buckets_used(s, p, b, e)
  local n = p.window / p.bucket
  local sum = 0
  for k = b - n + 1, b do sum = sum + buckets_count(s, k) end
  return buckets_count(s, b - n) * (p.bucket - e) / p.bucket + sum
end

-- buckets_retry mirrors algo.Buckets.retryAfter: walk the bucket boundaries
-- ahead of now, solving the oldest bucket's linear decay in each.
local function buckets_retry(s, p, b, e, cost)
  local n, r = p.window / p.bucket, p.bucket
  local rest = 0
  for k = b - n + 1, b do rest = rest + buckets_count(s, k) end
  local k = b
  while true do
    if k > b then rest = rest + buckets_count(s, k) - buckets_count(s, k - n) end
    local start = 0
    if k == b then start = e end
    local old = buckets_count(s, k - n)
    local room = p.rate - rest - cost
    if room >= 0 then
      local at = start
      if old > 0 then at = math.max(at, r - room * r / old) end
      if at < r then return ceil_us((k - b) * r - e + at) end
    end
    k = k + 1
  end
end

local function buckets_reset(s, p, now)
  local n = p.window / p.bucket
  local k = s.head
  while k > s.head - #s.counts do
    if buckets_count(s, k) > 0 then return math.max(0, (k + n + 1) * p.bucket - now) end
    k = k - 1
  end
  return 0
end

ALGOS['b'] = {
  load = function(key, p)
    local v = redis.call('GET', key)
    local s = {head = 0, counts = {}}
    if v then
      local head, ring = string.match(v, '^(-?%d+):([%d,]+)$')
      if head then
        s.head = tonumber(head)
        for c in string.gmatch(ring, '%d+') do s.counts[#s.counts + 1] = tonumber(c) end
      end
    end
    return s
  end,
  eval = function(s, p, now, cost)
    local b = floordiv(now, p.bucket)
    local e = now - b * p.bucket
    local used = buckets_used(s, p, b, e)
    local reset = buckets_reset(s, p, now)
    if fits(used, cost, p.rate) then return true, used, 0, reset end
    return false, used, buckets_retry(s, p, b, e, cost), reset
  end,
  record = function(s, p, now, cost)
    local n = p.window / p.bucket
    local b = floordiv(now, p.bucket)
    if #s.counts ~= n + 1 then
      s.counts, s.head = {}, b
      for i = 1, n + 1 do s.counts[i] = 0 end
    end
    if b > s.head then
      local k = s.head + 1
      while k <= b and k <= s.head + n + 1 do
        s.counts[floormod(k, n + 1) + 1] = 0
        k = k + 1
      end
      s.head = b
    end
    local slot = floormod(math.max(b, s.head - n), n + 1) + 1
    s.counts[slot] = s.counts[slot] + cost
    return buckets_used(s, p, b, now - b * p.bucket), buckets_reset(s, p, now)
  end,
  save = function(key, s, p, ttl)
    local parts = {}
    for i = 1, #s.counts do parts[i] = string.format('%d', s.counts[i]) end
    redis.call('SET', key, string.format('%d:', s.head) .. table.concat(parts, ','), 'PX', ttl)
  end,
  -- refund takes cost back from the bucket of `at` if the ring still
  -- holds it.
  refund = function(key, p, at, cost)
    local s = ALGOS['b'].load(key, p)
    local k = floordiv(at, p.bucket)
    if #s.counts == 0 or k > s.head or k <= s.head - #s.counts then return end
    local slot = floormod(k, #s.counts) + 1
    s.counts[slot] = math.max(0, s.counts[slot] - cost)
    local ttl = redis.call('PTTL', key)
    if ttl > 0 then ALGOS['b'].save(key, s, p, ttl) end
  end,
}
