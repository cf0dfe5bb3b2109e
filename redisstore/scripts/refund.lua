-- refund.lua: takes back a cost that decide.lua recorded, for a check whose
-- hits spanned several Cluster slots and was denied in another slot.
--
-- KEYS[i]: the state key of hit i, as given to decide.lua.
-- ARGV[1]: the time decide.lua recorded at (its reply's now), µs.
-- ARGV[2]: the cost recorded, an integer > 0.
-- ARGV[3]: the check's log member id, "<call id>.<j>" as decide.lua made it.
-- ARGV[4 + 5(i−1) ...]: hit i's algorithm code, rate, window (µs), bucket
--   (µs), and the instant its record put the cost at (algo.RecordedAt of
--   the state decide.lua read: later than ARGV[1] when the state was ahead
--   of the clock), µs: five values per hit.
--
-- Each algorithm removes what the record added, as far as the state still
-- holds it: the window or bucket counter of that time if still kept (never
-- below zero), the log member of the id (and its cost from the sum), the
-- decayed cost from a decay count, the cost's emission time from a GCRA
-- TAT, exactly. The TTL is kept.
--
-- Reply: an array of one integer, the number of hits processed.
-- Complexity: O(1) per hit; O(log N) per log hit.

if redis.replicate_commands then redis.replicate_commands() end

local REFUND = {w = w_refund, b = b_refund, l = l_refund, d = d_refund, g = g_refund}
local at, cost, id = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
for i = 1, #KEYS do
  local a = 3 + (i - 1) * 5
  local code = ARGV[a + 1]
  if not REFUND[code] then return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(code)) end
  LC[i], LR[i], LW[i], LB[i] = code, tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  if code == 'g' then LQ[i], LM[i] = floordiv(LW[i], LR[i]), floormod(LW[i], LR[i]) end
  if code == 'b' then LN[i] = LW[i] / LB[i]; LF[i] = '<' .. string.rep('d', LN[i] + 2) end
  local rat = tonumber(ARGV[a + 5])
  if code ~= 'w' and code ~= 'b' then rat = at end
  REFUND[code](KEYS[i], i, rat, cost, id)
end
return {#KEYS}
