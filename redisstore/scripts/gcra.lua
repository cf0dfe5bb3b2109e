-- gcra.lua: the generic cell rate algorithm, algo.GCRA. Emission interval
-- T = W/Rate µs, burst Rate. The theoretical arrival time is kept exactly,
-- as whole µs t plus f/Rate µs (0 <= f < Rate), so the decision compares
-- integers.
-- State: a string of two doubles packed by struct ('<dd'): t = TAT µs, f =
-- the fraction. O(1): GET, then SET ... PX when recorded.
-- Snapshot replied: t, f as stored (0 0 when missing).

-- muldiv returns floor(a·b/m) and a·b mod m for integers 0 <= a <= m,
-- 0 <= b < m, m < 2^31 (algo.MulDiv): directly when a·b < 2^53, else in
-- two steps of 16 bits of a, every product below 2^48.
local function muldiv(a, b, m)
  local p = a * b
  if p < 9007199254740992 then
    local q = floordiv(p, m)
    return q, p - q * m
  end
  local ah, al = floor(a / 65536), a % 65536
  p = ah * b
  local q1 = floordiv(p, m)
  p = (p - q1 * m) * 65536 + al * b
  local q2 = floordiv(p, m)
  return q1 * 65536 + q2, p - q2 * m
end

-- g_advance returns (q, r) + cost·W/Rate µs (algo's advance).
local function g_advance(l, q, r, cost)
  local rate = LR[l]
  local dq, dr = muldiv(cost, LM[l], rate)
  q, r = q + cost * LQ[l] + dq, r + dr
  if r >= rate then q, r = q + 1, r - rate end
  return q, r
end

local function g_load(i, key, l, now, cost, reply, r)
  local v = call('GET', key)
  local tat, frac = 0, 0
  if v then tat, frac = sunpack('<dd', v) end
  reply[r + 1], reply[r + 2] = tat, frac
  local q, f = now, 0
  if tat >= now then q, f = tat, min(frac, LR[l] - 1) end
  q, f = g_advance(l, q, f, cost)
  W1[i], W2[i] = q, f
  local e = now + LW[l]
  return q < e or (q == e and f == 0), r + 2
end

local function g_record(i, key, l, now, cost, pad)
  local q, r = W1[i], W2[i]
  local wait = q - now
  if r > 0 then wait = wait + 1 end
  call('SET', key, spack('<dd', q, r), 'PX', ttl_ms(wait, pad))
end

-- g_refund moves TAT back by cost·T exactly; evaluations take max(TAT,
-- now), so a TAT moved into the past changes nothing.
local function g_refund(key, l, at, cost)
  local v = call('GET', key)
  if not v then return end
  local q, r = sunpack('<dd', v)
  local rate = LR[l]
  local dq, dr = muldiv(cost, LM[l], rate)
  q, r = q - cost * LQ[l] - dq, min(r, rate - 1) - dr
  if r < 0 then q, r = q - 1, r + rate end
  call('SET', key, spack('<dd', q, r), 'KEEPTTL')
end
