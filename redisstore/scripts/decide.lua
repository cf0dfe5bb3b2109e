-- decide.lua: decide_check, the body of one check (algo.Decide), shared by
-- check.lua (one check per call) and batch.lua (many checks per call). Not
-- a script on its own; see common.lua.
--
-- decide_check(k, n, a, now, cost, id, pad, reply, compact) decides the
-- check whose
-- n hits have their keys at KEYS[k+1 .. k+n] and their five arguments each
-- (algorithm code, rate, window µs, bucket µs, shadow "1"/"0") at
-- ARGV[a+1 .. a+5n]. Every hit is evaluated; if every non-shadow hit fits
-- and cost > 0, the cost is recorded on every hit (shadow ones included)
-- and each written key gets a TTL of ceil(reset_after / 1000) + pad ms in
-- the same call. Otherwise nothing is written. It appends to reply:
-- allowed ("1"/"0"), now (µs), then six strings per hit: fits ("1"/"0"),
-- used before, retry_after (µs), reset_after before (µs), used after,
-- reset_after after (equal to the values before when nothing was
-- recorded). compact (batch.lua) appends less, for speed: allowed, then one
-- string per hit, "<fits> <used> <retry_after> <reset_after>" with the
-- values after the check when it was recorded, before otherwise. It
-- returns nil, or an error reply for an unknown algorithm (before anything
-- is written).
local function decide_check(k, n, a, now, cost, id, pad, reply, compact)
  local hits, allowed = {}, true
  for i = 1, n do
    local b = a + (i - 1) * 5
    local h = {
      key = KEYS[k + i],
      algo = ALGOS[ARGV[b + 1]],
      p = {rate = tonumber(ARGV[b + 2]), window = tonumber(ARGV[b + 3]), bucket = tonumber(ARGV[b + 4])},
      shadow = ARGV[b + 5] == '1',
    }
    if not h.algo then return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(ARGV[b + 1])) end
    h.s = h.algo.load(h.key, h.p, now)
    h.fits, h.used, h.retry, h.reset = h.algo.eval(h.s, h.p, now, cost)
    h.used_after, h.reset_after = h.used, h.reset
    if not h.fits and not h.shadow then allowed = false end
    hits[i] = h
  end
  if allowed and cost > 0 then
    for _, h in ipairs(hits) do
      h.used_after, h.reset_after = h.algo.record(h.s, h.p, now, cost, id)
      h.algo.save(h.key, h.s, h.p, math.max(1, math.ceil(h.reset_after / 1000) + pad))
    end
  end
  reply[#reply + 1] = allowed and '1' or '0'
  if compact then
    for _, h in ipairs(hits) do
      reply[#reply + 1] = string.format('%d %.17g %.17g %.17g', h.fits and 1 or 0, h.used_after, h.retry, h.reset_after)
    end
    return nil
  end
  reply[#reply + 1] = num(now)
  for _, h in ipairs(hits) do
    reply[#reply + 1] = h.fits and '1' or '0'
    reply[#reply + 1] = num(h.used)
    reply[#reply + 1] = num(h.retry)
    reply[#reply + 1] = num(h.reset)
    reply[#reply + 1] = num(h.used_after)
    reply[#reply + 1] = num(h.reset_after)
  end
  return nil
end

-- server_now reads the Redis server's clock in µs.
local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
