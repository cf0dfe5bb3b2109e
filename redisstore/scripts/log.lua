-- log.lua: the exact sliding log, algo.Log, in a sorted set whose cost per
-- check does not grow with the events in the window.
-- State: one sorted set. Each recorded event is one member "<cost>:<id>"
-- scored by its time in µs (> 0); id is unique per check (the store's
-- random prefix, a call counter and the check's place in the call), so two
-- events never collide, even at the same µs. Two bookkeeping members with
-- negative scores, below every event: "%n" scored −1 − (the sum of the
-- costs in the set) and "%t" scored −1 − (the newest event's time).
-- Used = sum − the costs of the events scored in [0, now − W], which are
-- read (and, when recording, removed): each event is read there once or
-- twice in its life, so the cost per check is O(log N) amortized, N the
-- events in the set. A denied check also reads the oldest live events it
-- needs to leave: O(log N + the excess over the limit), O(log N) for a
-- unit check.
-- Snapshot replied: used (the live cost before the check), retry_after µs
-- (0 when it fits), the newest event's time µs (0 when none).

-- l_cost is the cost of event member m.
local function l_cost(m)
  return tonumber(string.match(m, '^(%d+):'))
end

-- l_retry walks the live events oldest first: the cost fits once enough of
-- them have left, event k leaving (now − W, now] when now reaches its time
-- + W. Every event costs at least 1, so the oldest used + cost − rate
-- events are always enough: one read of exactly those (one, for a unit
-- check on a full log).
local function l_retry(key, l, now, cost, used)
  local need = used + cost - LR[l]
  local ev = call('ZRANGEBYSCORE', key, string.format('(%d', now - LW[l]), '+inf', 'WITHSCORES', 'LIMIT', 0, need)
  for j = 1, #ev, 2 do
    used = used - l_cost(ev[j])
    if used + cost <= LR[l] then return tonumber(ev[j + 1]) + LW[l] - now end
  end
  return 0
end

local function l_load(i, key, l, now, cost, reply, r)
  local v = call('ZMSCORE', key, '%n', '%t')
  local sum, newest = 0, 0
  if v[1] then sum, newest = -1 - tonumber(v[1]), -1 - tonumber(v[2]) end
  local old = call('ZRANGEBYSCORE', key, 0, now - LW[l])
  for j = 1, #old do sum = sum - l_cost(old[j]) end
  local ok = sum + cost <= LR[l]
  local retry = 0
  if not ok then retry = l_retry(key, l, now, cost, sum) end
  reply[r + 1], reply[r + 2], reply[r + 3] = sum, retry, newest
  W1[i], W2[i], W3[i] = sum, newest, #old
  return ok, r + 3
end

-- l_record removes the events that left the window and adds one member at
-- now, or at the newest event's time when the clock is behind it.
local function l_record(i, key, l, now, cost, pad, j)
  if W3[i] > 0 then call('ZREMRANGEBYSCORE', key, 0, now - LW[l]) end
  local at = max(now, W2[i])
  call('ZADD', key, at, cost .. ':' .. ID .. '.' .. j, -1 - (W1[i] + cost), '%n', -1 - at, '%t')
  call('PEXPIRE', key, ttl_ms(at + LW[l] - now, pad))
end

-- l_refund removes the member the check with this id recorded, if still
-- there, from the sum, and sets the newest time to the newest event left
-- (algo.Log.Refund).
local function l_refund(key, l, at, cost, id)
  if call('ZREM', key, cost .. ':' .. id) == 0 then return end
  local s = tonumber(call('ZSCORE', key, '%n')) or -1
  local top = call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local newest = 0
  if top[2] and tonumber(top[2]) > 0 then newest = tonumber(top[2]) end
  call('ZADD', key, min(-1, s + cost), '%n', -1 - newest, '%t')
end
