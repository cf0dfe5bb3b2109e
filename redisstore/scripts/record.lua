-- record.lua: adds cost to states without deciding a check: cost already
-- admitted elsewhere (an edge.Async's first sight) and sent later, many
-- keys in one call. Each record is one key, recorded where its cost fits
-- at now, as a check of that cost alone would be, and left untouched where
-- it does not: the store never holds more than its limit.
--
-- KEYS: one state key per record (one hash slot in a Cluster).
-- ARGV[1..4+5L]: as decide.lua's: now in µs ("" reads the server's TIME),
--   TTL padding in ms, the call's id, L limits of five values each.
-- Then per record: cost (integer > 0) and its limit number (1-based).
--
-- Reply: a flat array of integers: now (µs), then per record 1 (recorded),
-- 0 (did not fit: nothing written) or -1 (failed on its key, say a key of
-- the wrong type: it fails alone and writes nothing). A shadow limit
-- records whether it fits or not, as a check's shadow hit does.
--
-- It replies no snapshot and decides nothing else, so a record costs Redis
-- the algorithm's own commands and one integer of reply: for a sliding
-- window not stored yet, one SET ... NX.

if redis.replicate_commands then redis.replicate_commands() end

local LOAD = {w = w_load, b = b_load, l = l_load, d = d_load, g = g_load}
local RECORD = {w = w_record, b = b_record, l = l_record, d = d_record, g = g_record}

local now = tonumber(ARGV[1])
if not now then
  local t = call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local pad = tonumber(ARGV[2])
local nl = tonumber(ARGV[4])
local bad = load_limits(nl, LOAD)
if bad then return bad end

-- record_one records the cost of record j, whose key is KEYS[j] and whose
-- limit is l, if it fits; it returns 1 or 0.
local scratch = {}
local function record_one(j, l, cost)
  local code = LC[l]
  if code == 'w' and cost <= LR[l] then
    -- A sliding window not stored yet (most first-sight keys): its state
    -- after the record, written only if the key is missing, one command
    -- instead of GET and SET; the same state and TTL as w_record writes.
    local wi = floordiv(now, LW[l])
    if call('SET', KEYS[j], spack('<ddd', wi, cost, 0), 'NX', 'PX', ttl_ms((wi + 2) * LW[l] - now, pad)) then
      return 1
    end
  end
  local f = LOAD[code](1, KEYS[j], l, now, cost, scratch, 0)
  if not f and not LS[l] then return 0 end
  RECORD[code](1, KEYS[j], l, now, cost, pad, j)
  return 1
end

local reply = {now}
local a = 5 + 5 * nl
for j = 1, #KEYS do
  local ok, res = pcall(record_one, j, tonumber(ARGV[a + 1]), tonumber(ARGV[a]))
  reply[j + 1] = ok and res or -1
  a = a + 2
end
return reply
