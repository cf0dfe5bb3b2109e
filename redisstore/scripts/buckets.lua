-- buckets.lua: the bucketed sliding window, algo.Buckets. n = W/R buckets
-- of R µs; a ring of n+1 counters, bucket k in slot k mod (n+1).
-- State: a string of n+2 doubles packed by struct: h = index of the newest
-- bucket, then the ring's counters. Used = oldest bucket weighted by the
-- part of it still inside (now − W, now] + the n newer buckets. O(n) per
-- check (n <= sluice.MaxBuckets): GET, then SET ... PX (or KEEPTTL) when
-- recorded.
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
  local v = call('GET', key)
  local head, ring = false, {}
  if v then
    ring = {sunpack(LF[l], v)} -- head, the n+1 counters, then struct's position
    head = table.remove(ring, 1)
    ring[n + 2] = nil
  else
    for j = 1, n + 1 do ring[j] = 0 end
  end
  reply[r + 1] = head or 0
  for j = 1, n + 1 do reply[r + 1 + j] = ring[j] end
  W2[i], RING[i] = head, ring
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
-- advances past, and writes the state with its TTL.
local function b_record(i, key, l, now, cost, pad)
  local n, R, b, head, ring = LN[l], LB[l], W1[i], W2[i], RING[i]
  if head and b - head <= n then
    for k = head + 1, b do ring[floormod(k, n + 1) + 1] = 0 end
  else
    for j = 1, n + 1 do ring[j] = 0 end
  end
  local slot = floormod(b, n + 1) + 1
  ring[slot] = ring[slot] + cost
  -- The usage is zero once bucket b has left the window, at (b+n+1)·R µs;
  -- a key written in bucket b already expires then.
  local v = spack(LF[l], b, unpack(ring))
  if head == b then
    call('SET', key, v, 'KEEPTTL')
  else
    call('SET', key, v, 'PX', ttl_ms((b + n + 1) * R - now, pad))
  end
end

-- b_refund takes cost back from the bucket b_record used (the newest when
-- `at` was behind it) if the ring still holds it (algo.Buckets.Refund).
local function b_refund(key, l, at, cost)
  local n = LN[l]
  local v = call('GET', key)
  if not v then return end
  local ring = {sunpack(LF[l], v)}
  local head = table.remove(ring, 1)
  ring[n + 2] = nil
  local k = floordiv(at, LB[l])
  if k > head or k <= head - n - 1 then return end
  local slot = floormod(k, n + 1) + 1
  ring[slot] = max(0, ring[slot] - cost)
  call('SET', key, spack(LF[l], head, unpack(ring)), 'KEEPTTL')
end
