-- decay.lua: the exponentially decayed count (AR1), algo.Decay.
-- State: one string "<S>:<T0>": the count S at time T0 µs, S printed with
-- '%.17g' so it round-trips exactly. S(now) = S·exp(−(now − T0)/W); below
-- 0.01 it counts as zero. O(1).

local DECAY_ZERO = 0.01

local function decay_at(s, p, now)
  local v = s.s
  if now > s.t0 then v = v * math.exp(-(now - s.t0) / p.window) end
  if v < DECAY_ZERO then return 0 end
  return v
end

local function decay_wait(p, from, to)
  if from <= to then return 0 end
  return ceil_us(p.window * math.log(from / to))
end

ALGOS['d'] = {
  load = function(key, p)
    local v = redis.call('GET', key)
    local s = {s = 0, t0 = 0}
    if v then
      local sv, t0 = string.match(v, '^([^:]+):([^:]+)$')
      if sv then s.s, s.t0 = tonumber(sv), tonumber(t0) end
    end
    return s
  end,
  eval = function(s, p, now, cost)
    local v = decay_at(s, p, now)
    local reset = decay_wait(p, v, DECAY_ZERO)
    if fits(v, cost, p.rate) then return true, v, 0, reset end
    return false, v, decay_wait(p, v, math.max(p.rate - cost, DECAY_ZERO)), reset
  end,
  record = function(s, p, now, cost)
    s.s, s.t0 = decay_at(s, p, now) + cost, math.max(now, s.t0)
    return s.s, decay_wait(p, s.s, DECAY_ZERO)
  end,
  save = function(key, s, p, ttl)
    redis.call('SET', key, num(s.s) .. ':' .. num(s.t0), 'PX', ttl)
  end,
  -- refund subtracts the cost recorded at `at`, decayed to the state's
  -- time: the model is linear, so this undoes the record exactly.
  refund = function(key, p, at, cost)
    local s = ALGOS['d'].load(key, p)
    local back = cost
    if s.t0 > at then back = cost * math.exp(-(s.t0 - at) / p.window) end
    s.s = math.max(0, s.s - back)
    local ttl = redis.call('PTTL', key)
    if ttl > 0 then ALGOS['d'].save(key, s, p, ttl) end
  end,
}
