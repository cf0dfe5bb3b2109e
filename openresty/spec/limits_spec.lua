-- sluice.limits: spec strings read as sluice.ParseLimits reads them, and
-- checks validated as sluice.Check.Validate does.
local limits = require "sluice.limits"

local S = 1000000

describe("parse_limit", function()
  local good = {
    { "10r/s", 10, S },
    { "10r/m", 10, 60 * S },
    { "10r/h", 10, 3600 * S },
    { "10r/d", 10, 86400 * S },
    { " 100r/s ", 100, S },
    { "20r/30s", 20, 30 * S },
    { "1r/500ms", 1, S / 2 },
    { "5r/1h30m", 5, 5400 * S },
  }
  for _, c in ipairs(good) do
    it(string.format("%q", c[1]), function()
      local l, err = limits.parse_limit(c[1])
      assert.is_nil(err)
      assert.are.equal(c[2], l.rate)
      assert.are.equal(c[3], l.window)
      assert.are.equal("sliding-window", l.algorithm)
    end)
  end

  local bad = { "", "10", "r/s", "0r/s", "-1r/s", "1.5r/s", "10r/", "10r/x", "10r/0s", "10 r/s" }
  for _, s in ipairs(bad) do
    it(string.format("refuses %q", s), function()
      local l, err = limits.parse_limit(s)
      assert.is_nil(l)
      assert.are.equal(limits.INVALID, err:sub(1, #limits.INVALID))
    end)
  end
end)

describe("parse_limit's errors", function()
  for _, s in ipairs({ "99999999999999999999r/s", "1r/100000000h", "0r/s", "2000000000000r/s" }) do
    it(string.format("name %q once", s), function()
      local _, err = limits.parse_limit(s)
      local _, n = err:gsub('limit "', "")
      assert.are.equal(1, n, err)
      assert.truthy(err:find(string.format("%q", s), 1, true), err)
    end)
  end
end)

describe("parse_limits", function()
  it("reads a list", function()
    local ls = assert(limits.parse_limits("1r/5s, 5r/h"))
    assert.are.equal(2, #ls)
    assert.are.equal(5 * S, ls[1].window)
    assert.are.equal(3600 * S, ls[2].window)
  end)
  it("refuses an empty element", function()
    local ls, err = limits.parse_limits("1r/s,,2r/m")
    assert.is_nil(ls)
    assert.truthy(err:find("element 2 is empty", 1, true))
  end)
end)

describe("spec", function()
  it("prints a limit as Limit.String does", function()
    assert.are.equal("10r/m", limits.spec(assert(limits.parse_limit("10r/m"))))
    assert.are.equal("20r/30s", limits.spec(assert(limits.parse_limit("20r/30s"))))
    assert.are.equal("5r/1h30m", limits.spec(assert(limits.parse_limit("5r/90m"))))
  end)
end)

describe("validate_check", function()
  local l = assert(limits.parse_limit("10r/s"))
  it("accepts a check", function()
    assert.is_nil(limits.validate_check { hits = { { zone = "z", key = "k", limit = l } }, cost = 1 })
  end)
  local cases = {
    { "no hits", { hits = {}, cost = 1 }, "check has no hits" },
    { "an empty key", { hits = { { key = "", limit = l } }, cost = 1 }, "hit 0: empty key" },
    { "a cost above the rate", { hits = { { key = "k", limit = l } }, cost = 11 }, "could never pass" },
    { "a fractional cost", { hits = { { key = "k", limit = l } }, cost = 1.5 }, "cost must be an integer" },
    { "two hits on one state", { hits = { { key = "k", limit = l }, { key = "k", limit = l } }, cost = 1 },
      "hits 0 and 1 share state" },
    { "a key over 64 KB", { hits = { { key = string.rep("k", 65537), limit = l } }, cost = 1 }, "longer than 65536" },
  }
  for _, c in ipairs(cases) do
    it("refuses " .. c[1], function()
      local err = limits.validate_check(c[2])
      assert.truthy(err and err:find(c[3], 1, true), err)
    end)
  end
end)
