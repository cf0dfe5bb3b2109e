-- decide.lua: decide_check, the body of one check (algo.Decide), shared by
-- check.lua (one check per call) and batch.lua (many checks per call). Not
-- a script on its own; see common.lua.

-- small_int tells whether x is an integer of at most 2^53 in magnitude:
-- '%d' prints it exactly as '%.17g' does (no exponent below 1e17), and
-- faster.
local function small_int(x)
  return x == math.floor(x) and x <= 9007199254740992 and x >= -9007199254740992
end

-- compact_hit formats one hit of decide_check's compact reply: the same
-- text as string.format('%d %.17g %.17g %.17g', ...), built with '%d' for
-- the values that are small integers (retry and reset always are; used is
-- when nothing is carried over from a previous window).
local function compact_hit(fits, used, retry, reset)
  local f = fits and 1 or 0
  if not (small_int(retry) and small_int(reset)) then
    return string.format('%d %.17g %.17g %.17g', f, used, retry, reset)
  end
  if small_int(used) then return string.format('%d %d %d %d', f, used, retry, reset) end
  return string.format('%d %.17g %d %d', f, used, retry, reset)
end

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
--
-- For speed, each hit is one table built whole by its constructor (no
-- rehash as fields are added), and it is also the hit's p: it has rate,
-- window and bucket, and the algorithms read nothing else from p.
local function decide_check(k, n, a, now, cost, id, pad, reply, compact)
  local hits, allowed = {}, true
  for i = 1, n do
    local b = a + (i - 1) * 5
    local h = {
      key = KEYS[k + i],
      algo = ALGOS[ARGV[b + 1]],
      rate = tonumber(ARGV[b + 2]), window = tonumber(ARGV[b + 3]), bucket = tonumber(ARGV[b + 4]),
      shadow = ARGV[b + 5] == '1',
      s = false, fits = false, used = 0, retry = 0, reset = 0, used_after = 0, reset_after = 0,
    }
    if not h.algo then return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(ARGV[b + 1])) end
    h.s = h.algo.load(h.key, h, now)
    h.fits, h.used, h.retry, h.reset = h.algo.eval(h.s, h, now, cost)
    h.used_after, h.reset_after = h.used, h.reset
    if not h.fits and not h.shadow then allowed = false end
    hits[i] = h
  end
  if allowed and cost > 0 then
    for i = 1, n do
      local h = hits[i]
      h.used_after, h.reset_after = h.algo.record(h.s, h, now, cost, id)
      h.algo.save(h.key, h.s, h, math.max(1, math.ceil(h.reset_after / 1000) + pad))
    end
  end
  reply[#reply + 1] = allowed and '1' or '0'
  if compact then
    for i = 1, n do
      local h = hits[i]
      reply[#reply + 1] = compact_hit(h.fits, h.used_after, h.retry, h.reset_after)
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
