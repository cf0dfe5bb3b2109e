-- decay.lua: the exponentially decayed count (AR1), algo.Decay.
-- State: a string of two doubles packed by struct ('<dd': the count is a
-- double, kept bit for bit, never printed): s = the count at time t µs.
-- S(now) = s·exp(−(now − t)/W); below 0.01 it counts as zero. O(1): GET,
-- then SET ... PX when recorded.
-- Snapshot replied: m, x, t, with s = m·2^(x−53) (math.frexp's mantissa
-- as an integer below 2^53: the reply is integers only); 0 0 0 when missing.

local DECAY_ZERO = 0.01

local function d_load(i, key, l, now, cost, reply, r)
  local v = call('GET', key)
  local s, t = 0, 0
  if v then s, t = sunpack('<dd', v) end
  local m, x = math.frexp(s)
  reply[r + 1], reply[r + 2], reply[r + 3] = m * 9007199254740992, x, t
  if now > t then s = s * math.exp(-(now - t) / LW[l]) end
  if s < DECAY_ZERO then s = 0 end
  W1[i], W2[i] = s, max(now, t)
  return fits(s, cost, LR[l]), r + 3
end

local function d_record(i, key, l, now, cost, pad)
  local s = W1[i] + cost
  local reset = 0
  if s > DECAY_ZERO then reset = ceil(LW[l] * math.log(s / DECAY_ZERO)) end
  call('SET', key, spack('<dd', s, W2[i]), 'PX', ttl_ms(reset, pad))
end

-- d_refund subtracts the cost recorded at `at`, decayed to the state's
-- time: the model is linear, so this undoes the record exactly.
local function d_refund(key, l, at, cost)
  local v = call('GET', key)
  if not v then return end
  local s, t = sunpack('<dd', v)
  local back = cost
  if t > at then back = cost * math.exp(-(t - at) / LW[l]) end
  call('SET', key, spack('<dd', max(0, s - back), t), 'KEEPTTL')
end
