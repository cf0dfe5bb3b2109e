-- window.lua: sliding-window (Cloudflare's two counters), algo.Window.
-- State: a hash {i = window index, c = cost in window i, p = cost in window
-- i−1}; window i covers [i·W, (i+1)·W) µs. Used = p·(W − e)/W + c, e the
-- µs elapsed in the window of now. O(1): HMGET, then HSET and PEXPIRE when
-- recorded.
-- Snapshot replied: i, c, p as stored (0 0 0 when missing).

-- w_load reads the state, appends its snapshot to reply after reply[r],
-- and returns whether cost fits at now and the new length. It keeps the
-- state rolled forward to now (algo.Window.at: a clock behind the state's
-- window reads as the start of that window) in W1..W4.
local function w_load(i, key, l, now, cost, reply, r)
  local v = redis.call('HMGET', key, 'i', 'c', 'p')
  local idx, cur, prev = tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or 0
  reply[r + 1], reply[r + 2], reply[r + 3] = idx, cur, prev
  local w = LW[l]
  local wi = floordiv(now, w)
  local e = now - wi * w
  if wi < idx then wi, e = idx, 0
  elseif wi == idx + 1 then prev, cur = cur, 0
  elseif wi > idx + 1 then prev, cur = 0, 0 end
  W1[i], W2[i], W3[i], W4[i] = wi, cur, prev, e
  return fits(prev * (w - e) / w + cur, cost, LR[l]), r + 3
end

-- w_record adds cost to the rolled state and writes it with its TTL (the
-- usage is zero 2W − e µs later).
local function w_record(i, key, l, now, cost, pad)
  redis.call('HSET', key, 'i', W1[i], 'c', W2[i] + cost, 'p', W3[i])
  redis.call('PEXPIRE', key, ttl_ms(2 * LW[l] - W4[i], pad))
end

-- w_refund takes cost back from the window w_record used (the state's
-- window when `at` was behind it) if it is still kept (algo.Window.Refund).
local function w_refund(key, l, at, cost)
  local v = redis.call('HMGET', key, 'i', 'c', 'p')
  local idx = tonumber(v[1])
  if not idx then return end
  local i = math.max(floordiv(at, LW[l]), idx)
  if i == idx then redis.call('HSET', key, 'c', math.max(0, (tonumber(v[2]) or 0) - cost))
  elseif i == idx - 1 then redis.call('HSET', key, 'p', math.max(0, (tonumber(v[3]) or 0) - cost)) end
end
