-- gcra.lua: the generic cell rate algorithm, algo.GCRA. Emission interval
-- T = W/Rate µs, burst Rate.
-- State: one string, the theoretical arrival time TAT in µs printed with
-- '%.17g'. Used = (max(TAT, now) − now)/T. O(1).

ALGOS['g'] = {
  load = function(key, p)
    local v = redis.call('GET', key)
    return {tat = tonumber(v) or 0}
  end,
  eval = function(s, p, now, cost)
    local t = p.window / p.rate
    local tat = math.max(s.tat, now)
    local used = (tat - now) / t
    local reset = ceil_us(tat - now)
    if fits(used, cost, p.rate) then return true, used, 0, reset end
    return false, used, ceil_us(tat + cost * t - p.window - now), reset
  end,
  record = function(s, p, now, cost)
    local t = p.window / p.rate
    s.tat = math.max(s.tat, now) + cost * t
    return (s.tat - now) / t, ceil_us(s.tat - now)
  end,
  save = function(key, s, p, ttl)
    redis.call('SET', key, num(s.tat), 'PX', ttl)
  end,
  -- refund moves TAT back by the cost's emission time; evaluations take
  -- max(TAT, now), so a TAT moved into the past changes nothing.
  refund = function(key, p, at, cost)
    local s = ALGOS['g'].load(key, p)
    if s.tat == 0 then return end
    s.tat = s.tat - cost * (p.window / p.rate)
    local ttl = redis.call('PTTL', key)
    if ttl > 0 then ALGOS['g'].save(key, s, p, ttl) end
  end,
}
