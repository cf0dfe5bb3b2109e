-- window.lua: sliding-window (Cloudflare's two counters), algo.Window.
-- State: a string of three doubles packed by struct ('<ddd': no text to
-- parse or format): i = window index, c = cost in window i, p = cost in
-- window i−1; window i covers [i·W, (i+1)·W) µs. Used = p·(W − e)/W + c, e
-- the µs elapsed in the window of now. O(1): GET, then SET ... PX (or
-- KEEPTTL) when recorded.
-- Snapshot replied: i, c, p as stored (0 0 0 when missing).

-- w_load reads the state, appends its snapshot to reply after reply[r],
-- and returns whether cost fits at now and the new length. It keeps the
-- state rolled forward to now (algo.Window.at: a clock behind the state's
-- window reads as the start of that window) in W1..W4, and the stored
-- index (false when missing) in W5.
local function w_load(i, key, l, now, cost, reply, r)
  local v = call('GET', key)
  local idx, cur, prev = 0, 0, 0
  W5[i] = false
  if v then
    idx, cur, prev = sunpack('<ddd', v)
    W5[i] = idx
  end
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

-- w_record adds cost to the rolled state and writes it. The usage is zero
-- once window i+1 ends, at (i+2)·W µs: the key expires then (plus the
-- padding). Written again in the same window, it keeps that expiry
-- (KEEPTTL, half the cost of setting one). The TTL is relative, so that a
-- clock given by the caller need not agree with the server's.
local function w_record(i, key, l, now, cost, pad)
  local v = spack('<ddd', W1[i], W2[i] + cost, W3[i])
  if W1[i] == W5[i] then
    call('SET', key, v, 'KEEPTTL')
  else
    call('SET', key, v, 'PX', ttl_ms((W1[i] + 2) * LW[l] - now, pad))
  end
end

-- w_refund takes cost back from the window w_record used (the state's
-- window when `at` was behind it) if it is still kept (algo.Window.Refund).
local function w_refund(key, l, at, cost)
  local v = call('GET', key)
  if not v then return end
  local idx, cur, prev = sunpack('<ddd', v)
  local i = floordiv(at, LW[l])
  if i == idx then cur = max(0, cur - cost)
  elseif i == idx - 1 then prev = max(0, prev - cost)
  else return end
  call('SET', key, spack('<ddd', idx, cur, prev), 'KEEPTTL')
end
