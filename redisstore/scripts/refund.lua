-- refund.lua: takes back a cost that check.lua recorded, for a check whose
-- hits spanned several Cluster slots and was denied in another slot.
--
-- KEYS[i]: the state key of hit i, as given to check.lua.
-- ARGV[1]: the time check.lua recorded at (its reply's now), µs.
-- ARGV[2]: the cost recorded, an integer > 0.
-- ARGV[3]: the check's id, as given to check.lua.
-- ARGV[4 + 4(i−1) ...]: hit i's algorithm code, rate, window (µs) and
--   bucket (µs) — four values per hit.
--
-- Each algorithm removes what the record added, as far as the state still
-- holds it: the window or bucket counter of that time if still kept (never
-- below zero), the log member of the id, the decayed cost from a decay
-- count, the cost's emission time from a GCRA TAT. The TTL is kept.
--
-- Reply: the integer number of hits processed. Complexity: as check.lua.

if redis.replicate_commands then redis.replicate_commands() end

local at, cost, id = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
for i = 1, #KEYS do
  local a = 3 + (i - 1) * 4
  local algo = ALGOS[ARGV[a + 1]]
  if not algo then return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(ARGV[a + 1])) end
  local p = {rate = tonumber(ARGV[a + 2]), window = tonumber(ARGV[a + 3]), bucket = tonumber(ARGV[a + 4])}
  algo.refund(KEYS[i], p, at, cost, id)
end
return #KEYS
