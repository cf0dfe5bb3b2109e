-- decide.lua: decides the checks of one call, one after the other, each
-- atomically and all or nothing (algo.Decide): the result is the same as
-- if they had been sent one by one in this order with no other command in
-- between. One check or many coalesced ones: the same script.
--
-- KEYS: the hits' state keys, check after check (one hash slot in a
--   Cluster).
-- ARGV[1]: now in µs since the epoch, or "" to read the server's TIME.
-- ARGV[2]: TTL padding in ms added to every TTL this call sets.
-- ARGV[3]: the call's id: check j's log members end in "<id>.<j>".
-- ARGV[4]: L, the number of distinct limits in the call; then five values
--   per limit: algorithm code (w, b, l, d, g), rate (integer), window µs,
--   bucket µs (the window for non-bucket algorithms), shadow ("1"/"0").
-- Then per check: cost (integer >= 0; 0 peeks and records nothing), the
--   number of hits n, and n limit numbers (1-based, into the list above).
--
-- Every hit of a check is evaluated; if every non-shadow hit fits and cost
-- > 0, the cost is recorded on every hit (shadow ones included) and each
-- written key gets a TTL (until its usage is zero, plus the padding) in the
-- same call. Otherwise nothing is written. This is algo.Decide's
-- all-or-nothing rule, copied: redisstore's TestSameAsModel holds the two
-- together (and the Go side turns the hits into a Decision with
-- sluice.Decision.Conclude, as every store does).
--
-- Reply: a flat array of integers: now (µs), then per check: allowed (1/0;
-- -1 when the check failed, say on a key of the wrong type: it fails alone
-- and writes nothing, and its hits' values are zeros), then per hit: fits
-- (1/0) and the hit's state as read before the check (the snapshot each
-- algorithm file documents). redisstore computes Used, Remaining,
-- RetryAfter and ResetAfter from the snapshot with internal/algo, the
-- code the memory store runs, so the script only decides and writes.
--
-- Complexity: per hit as its algorithm file says; no table per hit.

if redis.replicate_commands then redis.replicate_commands() end

-- server_now reads the Redis server's clock in µs.
local function server_now()
  local t = call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local LOAD = {w = w_load, b = b_load, l = l_load, d = d_load, g = g_load}
local RECORD = {w = w_record, b = b_record, l = l_record, d = d_record, g = g_record}
-- SNAP is each algorithm's snapshot length (buckets': 1 + its ring).
local SNAP = {w = 3, b = 1, l = 3, d = 3, g = 2}
local LEN = {} -- per limit: 1 (fits) + its snapshot's length

local now = tonumber(ARGV[1]) or server_now()
local pad = tonumber(ARGV[2])
local nl = tonumber(ARGV[4])
local bad = load_limits(nl, LOAD)
if bad then return bad end
for l = 1, nl do
  LEN[l] = 1 + SNAP[LC[l]] + LN[l] + (LC[l] == 'b' and 1 or 0)
end

local HL, HF = {}, {}

-- decide_check decides the check of n hits whose keys follow KEYS[k] and
-- whose limit numbers follow ARGV[a], appending its part of the reply after
-- reply[r]; it returns the new length.
local function decide_check(k, n, a, cost, j, reply, r)
  local r0, allowed = r + 1, true
  r = r0
  for i = 1, n do
    local l = tonumber(ARGV[a + i])
    local fr, f = r + 1, false
    f, r = LOAD[LC[l]](i, KEYS[k + i], l, now, cost, reply, fr)
    reply[fr] = f and 1 or 0
    HL[i] = l
    if not f and not LS[l] then allowed = false end
  end
  if allowed and cost > 0 then
    for i = 1, n do
      local l = HL[i]
      RECORD[LC[l]](i, KEYS[k + i], l, now, cost, pad, j)
    end
  end
  reply[r0] = allowed and 1 or 0
  return r
end

local reply = {now}
local r, a, k, j, na = 1, 5 + 5 * nl, 0, 0, #ARGV
while a <= na do
  local cost, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  j = j + 1
  local ok, res = pcall(decide_check, k, n, a + 1, cost, j, reply, r)
  if ok then
    r = res
  else
    r = r + 1
    reply[r] = -1
    for i = 1, n do
      for _ = 1, LEN[tonumber(ARGV[a + 1 + i])] do r = r + 1; reply[r] = 0 end
    end
  end
  k, a = k + n, a + 2 + n
end
return reply
