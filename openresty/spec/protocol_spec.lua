-- sluice.protocol: decide.lua's ARGV as redisstore's encode writes it,
-- its reply split as redisstore's decoder splits it, and a hit's result
-- from a snapshot with internal/algo's formulas.
local protocol = require "sluice.protocol"
local limits = require "sluice.limits"

local function spec(s, algorithm)
  local l = assert(limits.parse_limit(s))
  l.algorithm = algorithm or l.algorithm
  assert.is_nil(limits.validate(l))
  return { code = l.code, rate = l.rate, window = l.window, bucket = l.bucket, shadow = false }
end

local function strings(t)
  local out = {}
  for i, v in ipairs(t) do out[i] = tostring(v) end
  return out
end

describe("encode", function()
  it("writes each distinct limit once and refers to it by number", function()
    local sec, min = spec("10r/s"), spec("5r/m", "gcra")
    local calls = {
      { keys = { "k1", "k2" }, specs = { sec, min }, cost = 1 },
      { keys = { "k3" }, specs = { spec("10r/s") }, cost = 0 },
    }
    local ks, args = protocol.encode("", "0", "abc", calls)
    assert.are.same({ "k1", "k2", "k3" }, ks)
    assert.are.same({
      "", "0", "abc", "2",
      -- a limit without buckets sends its window as the bucket, as Go's
      -- ident.LimitOf does
      "w", "10", "1000000", "1000000", "0",
      "g", "5", "60000000", "60000000", "0",
      "1", "2", "1", "2",
      "0", "1", "1",
    }, strings(args))
  end)

  it("keeps a shadow limit apart from the same limit enforced", function()
    local a, b = spec("10r/s"), spec("10r/s")
    b.shadow = true
    local _, args = protocol.encode("", "0", "x", { { keys = { "k1", "k2" }, specs = { a, b }, cost = 1 } })
    assert.are.equal("2", tostring(args[4]))
    assert.are.equal("1", args[14])
  end)
end)

describe("decode", function()
  local w, g = spec("10r/s"), spec("5r/m", "gcra")
  local calls = { { specs = { w, g } }, { specs = { w } } }

  it("splits the reply per check and hit", function()
    -- time, then per check: allowed, and per hit fits and its snapshot
    -- (window: idx, cur, prev; gcra: tat, frac).
    local out = assert(protocol.decode({ 42, 1, 1, 7, 3, 0, 1, 9, 0 }, { calls[1] }))
    assert.are.equal(1, #out)
    assert.is_true(out[1].allowed)
    assert.are.equal(42, out[1].now)
    assert.are.same({ fits = true, snap = { 7, 3, 0 } }, out[1].hits[1])
    assert.are.same({ fits = true, snap = { 9, 0 } }, out[1].hits[2])
  end)

  it("marks a check the script failed on", function()
    local out = assert(protocol.decode({ 42, 1, 1, 7, 3, 0, 1, 9, 0, -1, 0, 0, 0, 0 }, calls))
    assert.is_false(out[2])
  end)

  local bad = {
    { "no time", { 0, 1, 1, 7, 3, 0, 1, 9, 0 } },
    { "too few values", { 42, 1, 1, 7, 3, 0, 1, 9 } },
    { "too many values", { 42, 1, 1, 7, 3, 0, 1, 9, 0, 5 } },
    { "allowed not 0, 1 or -1", { 42, 2, 1, 7, 3, 0, 1, 9, 0 } },
    { "fits not 0 or 1", { 42, 1, 2, 7, 3, 0, 1, 9, 0 } },
  }
  for _, c in ipairs(bad) do
    it("refuses " .. c[1], function()
      local out, err = protocol.decode(c[2], { calls[1] })
      assert.is_nil(out)
      assert.is_string(err)
    end)
  end
end)

describe("result", function()
  it("computes a sliding window's usage, remaining and reset", function()
    local w = spec("10r/s")
    -- Window 5 (5 s to 6 s): 3 in the current one, 4 in the previous one,
    -- now a quarter into it: used = 4 * 3/4 + 3 = 6.
    local now = 5 * 1000000 + 250000
    local r = protocol.result(w, { fits = true, snap = { 5, 3, 4 } }, now, 1, false)
    assert.are.equal(6, r.used)
    assert.are.equal(4, r.remaining)
    assert.are.equal(0, r.retry_after)
    assert.are.equal(2 * 1000000 - 250000, r.reset_after)
  end)

  it("counts the cost it recorded", function()
    local w = spec("10r/s")
    local r = protocol.result(w, { fits = true, snap = { 5, 3, 4 } }, 5250000, 2, true)
    assert.are.equal(8, r.used)
    assert.are.equal(2, r.remaining)
  end)

  it("gives a denied hit a wait", function()
    local w = spec("10r/s")
    local r = protocol.result(w, { fits = false, snap = { 5, 10, 0 } }, 5250000, 1, false)
    assert.is_false(r.allowed)
    assert.are.equal(0, r.remaining)
    assert.is_true(r.retry_after > 0)
  end)
end)
