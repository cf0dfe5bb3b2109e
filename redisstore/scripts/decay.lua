-- decay.lua: the exponentially decayed count (AR1), algo.Decay.
-- State: a hash {m, x, t}: the count S = m·2^(x−53) (m an integer below
-- 2^53: math.frexp's mantissa, so S round-trips exactly without printing a
-- float) at time t µs. S(now) = S·exp(−(now − t)/W); below 0.01 it counts
-- as zero. O(1): HMGET, then HSET and PEXPIRE when recorded.
-- Snapshot replied: m, x, t as stored (0 0 0 when missing).

local DECAY_ZERO = 0.01

local function d_load(i, key, l, now, cost, reply, r)
  local v = redis.call('HMGET', key, 'm', 'x', 't')
  local m, x, t = tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or 0
  reply[r + 1], reply[r + 2], reply[r + 3] = m, x, t
  local s = 0
  if m ~= 0 then s = math.ldexp(m, x - 53) end
  if now > t then s = s * math.exp(-(now - t) / LW[l]) end
  if s < DECAY_ZERO then s = 0 end
  W1[i], W2[i] = s, math.max(now, t)
  return fits(s, cost, LR[l]), r + 3
end

-- d_store writes count s at time t, keeping the key's TTL unless ttl is
-- given.
local function d_store(key, s, t)
  local m, x = math.frexp(s)
  redis.call('HSET', key, 'm', m * 9007199254740992, 'x', x, 't', t)
end

local function d_record(i, key, l, now, cost, pad)
  local s = W1[i] + cost
  d_store(key, s, W2[i])
  local reset = 0
  if s > DECAY_ZERO then reset = math.ceil(LW[l] * math.log(s / DECAY_ZERO)) end
  redis.call('PEXPIRE', key, ttl_ms(reset, pad))
end

-- d_refund subtracts the cost recorded at `at`, decayed to the state's
-- time: the model is linear, so this undoes the record exactly.
local function d_refund(key, l, at, cost)
  local v = redis.call('HMGET', key, 'm', 'x', 't')
  local m, x, t = tonumber(v[1]), tonumber(v[2]) or 0, tonumber(v[3]) or 0
  if not m then return end
  local back = cost
  if t > at then back = cost * math.exp(-(t - at) / LW[l]) end
  d_store(key, math.max(0, math.ldexp(m, x - 53) - back), t)
end
