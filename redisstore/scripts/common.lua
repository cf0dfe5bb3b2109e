-- common.lua: helpers shared by every algorithm. Not a script on its own:
-- redisstore concatenates common.lua, the five algorithm files and one
-- entry file (decide.lua, refund.lua) into each script it loads.
--
-- Units: times and durations are microseconds (µs) held in Lua numbers
-- (doubles), exact up to 2^53 µs, about 285 years; costs and rates are
-- integers up to sluice.MaxRate (1e9). Every integer computed here stays
-- below 2^53, so it is exact. Numbers passed to redis.call are printed
-- exactly by Redis ('%.17g'); numbers joined into strings with '..' are not
-- (Lua prints '%.14g'), so no time is ever joined into a string.
--
-- Globals and library functions read on every check, as locals (a local is
-- a register; a global is a table lookup).
local KEYS, ARGV, call = KEYS, ARGV, redis.call
local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
local spack, sunpack = struct.pack, struct.unpack

-- ID is decide.lua's call id (ARGV[3]): check j's log members end in
-- ID .. '.' .. j.
local ID = ARGV[3]

-- Per-hit scratch: the algorithms keep a check's loaded state in the
-- arrays below, indexed by the hit's position in its check, instead of a
-- table per hit: W1..W5 hold what the record step needs, RING a buckets
-- ring. The state as stored goes straight into the reply (the snapshot).

local W1, W2, W3, W4, W5, RING = {}, {}, {}, {}, {}, {}

-- The call's limits, by their index in ARGV (see decide.lua): code, rate,
-- window µs, bucket µs, shadow, and derived values: for gcra W div Rate and
-- W mod Rate, for buckets the number of buckets n = W/R and the struct
-- format of its state.
local LC, LR, LW, LB, LS, LQ, LM, LN, LF = {}, {}, {}, {}, {}, {}, {}, {}, {}

-- fits mirrors algo.fits: used + cost <= rate, with the rounding slack
-- 1e-9 + 1e-12·rate of the estimating algorithms.
local function fits(used, cost, rate)
  return used + cost <= rate + 1e-9 + 1e-12 * rate
end

-- floordiv is floor(a / b) for integers a and b > 0, corrected for the
-- rounding of the double division.
local function floordiv(a, b)
  local q = floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

-- floormod is a mod n in [0, n).
local function floormod(a, n)
  return a - floordiv(a, n) * n
end

-- load_limits reads the call's nl limits from ARGV, five values each after
-- ARGV[4] (code, rate, window µs, bucket µs, shadow), into LC..LF with
-- their derived values; known maps the algorithm codes the entry script
-- runs. It returns an error reply for an unknown code, else nil.
local function load_limits(nl, known)
  for l = 1, nl do
    local a = 4 + (l - 1) * 5
    local code = ARGV[a + 1]
    if not known[code] then return redis.error_reply('ERR sluice: unknown algorithm ' .. code) end
    LC[l], LR[l], LW[l], LB[l], LS[l] = code, tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), ARGV[a + 5] == '1'
    LN[l] = 0
    if code == 'g' then LQ[l], LM[l] = floordiv(LW[l], LR[l]), floormod(LW[l], LR[l]) end
    if code == 'b' then
      local n = LW[l] / LB[l]
      LN[l], LF[l] = n, '<' .. string.rep('d', n + 2)
    end
  end
end

-- ttl_ms is the TTL of a key whose usage is zero after reset µs: whole ms,
-- at least 1, plus the padding.
local function ttl_ms(reset, pad)
  return max(1, ceil(reset / 1000) + pad)
end
