-- batch.lua: decides many checks in one call, one after the other, each
-- atomically and all or nothing (decide_check in decide.lua): the result
-- is the same as if the checks had been sent one by one in this order,
-- with no other command in between. Used to coalesce concurrent checks.
--
-- KEYS: the hits' state keys, check after check (one hash slot in a
--   Cluster).
-- ARGV[1]: TTL padding in ms added to every TTL this call sets.
-- ARGV[2]: the number of checks.
-- Then, per check: now in µs ("" for the server's TIME, read once per
--   call), cost (integer >= 0), id (unique per check), the number of hits
--   n, then five values per hit as in check.lua: algorithm code, rate,
--   window (µs), bucket (µs), shadow ("1"/"0").
--
-- Reply: 1 + n strings per check, concatenated: allowed ("1"/"0"), then
-- one string per hit, "<fits 1/0> <used> <retry_after µs> <reset_after
-- µs>", the values after the check when it was recorded (decide_check's
-- compact form: one string per hit is cheaper to build and to send than
-- six). A check that fails (a key of the wrong type under the prefix)
-- fails alone, before writing anything: its part of the reply is "E", then
-- the error message and n−1 empty strings, and the next checks go on.
--
-- Complexity: the sum of the checks' (see check.lua).

if redis.replicate_commands then redis.replicate_commands() end

local pad, count = tonumber(ARGV[1]), tonumber(ARGV[2])
local reply, k, a, clock = {}, 0, 2, nil
for _ = 1, count do
  local now = tonumber(ARGV[a + 1])
  if not now then
    clock = clock or server_now()
    now = clock
  end
  local cost, id, n = tonumber(ARGV[a + 2]), ARGV[a + 3], tonumber(ARGV[a + 4])
  local ok, err = pcall(decide_check, k, n, a + 4, now, cost, id, pad, reply, true)
  if not ok or err then
    reply[#reply + 1] = 'E'
    reply[#reply + 1] = tostring(type(err) == 'table' and err.err or err)
    for _ = 2, n do reply[#reply + 1] = '' end
  end
  k, a = k + n, a + 4 + 5 * n
end
return reply
