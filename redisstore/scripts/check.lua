-- check.lua: decides one check atomically, all or nothing (algo.Decide).
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
-- Every hit is evaluated; if every non-shadow hit fits and cost > 0, the
-- cost is recorded on every hit (shadow ones included) and each written key
-- gets a TTL of ceil(reset_after / 1000) + padding ms in the same call, so
-- no key is ever left without expiry. Otherwise nothing is written.
--
-- Reply: an array of strings: allowed ("1"/"0"), now (µs), then for each
-- hit six values: fits ("1"/"0"), used before the check, retry_after (µs),
-- reset_after before the check (µs), used after and reset_after after the
-- check (equal to the values before when nothing was recorded). Numbers are
-- printed with '%.17g', so fractions cross the wire as exact decimal
-- strings.
--
-- Complexity: O(1) per sliding-window, decay and gcra hit; O(W/R) per
-- buckets hit; O(events in the window) per log hit.

if redis.replicate_commands then redis.replicate_commands() end

local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost, id, pad = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])

local hits, allowed = {}, true
for i = 1, #KEYS do
  local a = 4 + (i - 1) * 5
  local h = {
    algo = ALGOS[ARGV[a + 1]],
    p = {rate = tonumber(ARGV[a + 2]), window = tonumber(ARGV[a + 3]), bucket = tonumber(ARGV[a + 4])},
    shadow = ARGV[a + 5] == '1',
  }
  if not h.algo then return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(ARGV[a + 1])) end
  h.s = h.algo.load(KEYS[i], h.p, now)
  h.fits, h.used, h.retry, h.reset = h.algo.eval(h.s, h.p, now, cost)
  h.used_after, h.reset_after = h.used, h.reset
  if not h.fits and not h.shadow then allowed = false end
  hits[i] = h
end

if allowed and cost > 0 then
  for i, h in ipairs(hits) do
    h.used_after, h.reset_after = h.algo.record(h.s, h.p, now, cost, id)
    h.algo.save(KEYS[i], h.s, h.p, math.max(1, math.ceil(h.reset_after / 1000) + pad))
  end
end

local reply = {allowed and '1' or '0', num(now)}
for _, h in ipairs(hits) do
  reply[#reply + 1] = h.fits and '1' or '0'
  reply[#reply + 1] = num(h.used)
  reply[#reply + 1] = num(h.retry)
  reply[#reply + 1] = num(h.reset)
  reply[#reply + 1] = num(h.used_after)
  reply[#reply + 1] = num(h.reset_after)
end
return reply
