-- buckets.lua: the bucketed sliding window, algo.Buckets. n = W/R buckets
-- of R µs; a ring of n+1 counters, bucket k in slot k mod (n+1).
-- State: a hash {h = index of the newest bucket, "0" .. "<n>" = the ring's
-- counters; a missing counter is 0}. Used = oldest bucket weighted by the
-- part of it still inside (now − W, now] + the n newer buckets. O(n) per
-- check (n <= sluice.MaxBuckets): HMGET of the n+2 fields, then one HSET
-- of the counters that changed and PEXPIRE when recorded.
-- Snapshot replied: h (0 when missing), then the n+1 counters, slot 0
-- first.

-- b_count is bucket k's cost in ring under head (0 for buckets newer than
-- head or too old to be kept, and for a missing state).
local function b_count(ring, head, n, k)
  if not head or k > head or k <= head - n - 1 then return 0 end
  return ring[floormod(k, n + 1) + 1]
end

local function b_load(i, key, l, now, cost, reply, r)
  local n, R = LN[l], LB[l]
  local v = redis.call('HMGET', key, unpack(LF[l]))
  local head = tonumber(v[1])
  local ring = {}
  reply[r + 1] = head or 0
  for j = 1, n + 1 do
    local c = tonumber(v[j + 1]) or 0
    ring[j], reply[r + 1 + j] = c, c
  end
  W2[i], RING[i] = head or false, ring
  -- algo.Buckets.at: a clock behind the newest bucket reads as its start.
  local b = floordiv(now, R)
  local e = now - b * R
  if head and b < head then b, e = head, 0 end
  W1[i] = b
  local sum = 0
  for k = b - n + 1, b do sum = sum + b_count(ring, head, n, k) end
  return fits(b_count(ring, head, n, b - n) * (R - e) / R + sum, cost, LR[l]), r + n + 2
end

-- b_record adds cost to bucket b (>= head), clearing the buckets it
-- advances past, and writes only the counters that changed.
local function b_record(i, key, l, now, cost, pad)
  local n, R, b, head, ring = LN[l], LB[l], W1[i], W2[i], RING[i]
  local args = {'h', b}
  if head and b - head <= n then
    for k = head + 1, b do
      local slot = floormod(k, n + 1)
      ring[slot + 1] = 0
      args[#args + 1], args[#args + 2] = slot, 0
    end
  else
    if head then redis.call('DEL', key) end
    for j = 1, n + 1 do ring[j] = 0 end
  end
  local slot = floormod(b, n + 1)
  ring[slot + 1] = ring[slot + 1] + cost
  args[#args + 1], args[#args + 2] = slot, ring[slot + 1]
  redis.call('HSET', key, unpack(args))
  redis.call('PEXPIRE', key, ttl_ms((b + n + 1) * R - now, pad))
end

-- b_refund takes cost back from the bucket b_record used (the newest when
-- `at` was behind it) if the ring still holds it (algo.Buckets.Refund).
local function b_refund(key, l, at, cost)
  local n = LN[l]
  local v = redis.call('HMGET', key, 'h')
  local head = tonumber(v[1])
  if not head then return end
  local k = math.max(floordiv(at, LB[l]), head)
  if k > head or k <= head - n - 1 then return end
  local slot = floormod(k, n + 1)
  local c = tonumber(redis.call('HGET', key, slot)) or 0
  redis.call('HSET', key, slot, math.max(0, c - cost))
end
