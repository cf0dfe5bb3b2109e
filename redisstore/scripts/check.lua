-- check.lua: decides one check atomically, all or nothing (algo.Decide;
-- the body is decide_check in decide.lua).
--
-- KEYS[i]: the state key of hit i (all in one hash slot in a Cluster).
-- ARGV[1]: now in µs since the epoch, or "" to read the server's TIME.
-- ARGV[2]: cost, an integer >= 0; 0 peeks and records nothing.
-- ARGV[3]: id, unique per check: names the check's members in log sets.
-- ARGV[4]: TTL padding in ms added to every TTL this call sets.
-- ARGV[5 + 5(i−1) ...]: hit i's algorithm code (w, b, l, d, g), rate
--   (integer), window (µs), bucket (µs; the window for non-bucket
--   algorithms) and shadow ("1" or "0").
--
-- Reply: an array of strings: allowed ("1"/"0"), now (µs), then six per
-- hit: fits ("1"/"0"), used before the check, retry_after (µs),
-- reset_after before the check (µs), used after, reset_after after.
-- Numbers are printed with '%.17g', so fractions cross the wire as exact
-- decimal strings.
--
-- Complexity: O(1) per sliding-window, decay and gcra hit; O(W/R) per
-- buckets hit; O(events in the window) per log hit.

if redis.replicate_commands then redis.replicate_commands() end

local now = tonumber(ARGV[1]) or server_now()
local reply = {}
local err = decide_check(0, #KEYS, 4, now, tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), reply)
if err then return err end
return reply
