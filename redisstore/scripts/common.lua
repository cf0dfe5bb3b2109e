-- common.lua: helpers shared by every algorithm. Not a script on its own:
-- redisstore concatenates common.lua, the five algorithm files and one
-- entry file (check.lua, refund.lua) into each script it loads.
--
-- Units: times and durations are microseconds (µs) held in Lua numbers
-- (doubles), exact up to 2^53 µs, about 285 years; costs and rates are
-- integers. Every formula mirrors internal/algo operation for operation, so
-- that the doubles round the same way in Go and in Lua.

-- fits mirrors algo.fits: used + cost <= rate, with the rounding slack
-- 1e-9 + 1e-12·rate.
local function fits(used, cost, rate)
  return used + cost <= rate + 1e-9 + 1e-12 * rate
end

-- ceil_us mirrors algo.ceilMicros: a wait rounded up to a whole µs, >= 0.
local function ceil_us(t)
  if t <= 0 then return 0 end
  return math.ceil(t)
end

-- floordiv is floor(a / b) for integers a and b > 0, corrected for the
-- rounding of the double division.
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

-- floormod is a mod n in [0, n).
local function floormod(a, n)
  return a - floordiv(a, n) * n
end

-- num formats a number for the wire: '%.17g' round-trips every double
-- exactly and prints integers below 1e17 without an exponent.
local function num(x)
  return string.format('%.17g', x)
end

-- Algorithms by their code in the key and in ARGV. Each has:
--   load(key, p)                -> state (a fresh one for a missing key)
--   eval(s, p, now, cost)       -> fits, used, retry_after, reset_after
--   record(s, p, now, cost, id) -> used, reset_after (state changed in s)
--   save(key, s, p, ttl_ms)     writes s with its TTL
--   refund(key, p, at, cost, id) removes a cost recorded at `at`
-- p = {rate = integer, window = µs, bucket = µs}.
local ALGOS = {}
