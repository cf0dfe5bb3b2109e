-- log.lua: the exact sliding log, algo.Log, in a sorted set.
-- State: one sorted set; each recorded event is one member
-- "<cost>:<id>" scored by its time in µs. id is unique per check (the store
-- makes it from a random per-Store prefix and a counter), so two events
-- never collide, even at the same µs. Used = Σ cost of members scored in
-- (now − W, +inf). O(events in the window) per check, at most MaxLogRate
-- plus what shadow hits recorded.

local function log_cost(member)
  return tonumber(string.match(member, '^(%d+):'))
end

ALGOS['l'] = {
  -- load reads the live events (scored above now − W), oldest first.
  load = function(key, p, now)
    local raw = redis.call('ZRANGEBYSCORE', key, '(' .. num(now - p.window), '+inf', 'WITHSCORES')
    local s = {at = {}, cost = {}, used = 0, key = key}
    for i = 1, #raw, 2 do
      local c = log_cost(raw[i])
      s.at[#s.at + 1], s.cost[#s.cost + 1] = tonumber(raw[i + 1]), c
      s.used = s.used + c
    end
    return s
  end,
  eval = function(s, p, now, cost)
    local reset = 0
    if #s.at > 0 then reset = math.max(0, s.at[#s.at] + p.window - now) end
    if s.used + cost <= p.rate then return true, s.used, 0, reset end
    -- The cost fits once enough of the oldest events have left: event i
    -- leaves (now − W, now] when now reaches at_i + W.
    local used = s.used
    for i = 1, #s.at do
      used = used - s.cost[i]
      if used + cost <= p.rate then return false, s.used, s.at[i] + p.window - now, reset end
    end
    return false, s.used, 0, reset
  end,
  -- record drops the events that left the window and adds one member; a
  -- clock behind the newest event records at the newest instant.
  record = function(s, p, now, cost, id)
    redis.call('ZREMRANGEBYSCORE', s.key, '-inf', num(now - p.window))
    local at = now
    if #s.at > 0 and s.at[#s.at] > at then at = s.at[#s.at] end
    redis.call('ZADD', s.key, num(at), string.format('%d:', cost) .. id)
    s.at[#s.at + 1], s.cost[#s.cost + 1] = at, cost
    s.used = s.used + cost
    return s.used, math.max(0, at + p.window - now)
  end,
  save = function(key, s, p, ttl)
    redis.call('PEXPIRE', key, ttl)
  end,
  -- refund removes the member the check with this id recorded.
  refund = function(key, p, at, cost, id)
    redis.call('ZREM', key, string.format('%d:', cost) .. id)
  end,
}
