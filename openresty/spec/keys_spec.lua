-- sluice.keys against redisstore: every expected value below is what
-- redisstore's encodePart, stateKey and slot return for the same input
-- (printed from the Go package), so the two sides write the same keys.
local keys = require "sluice.keys"
local limits = require "sluice.limits"

describe("encode_part", function()
  local cases = {
    { "alice", "alice" },
    { "a{b}c", "a%7Bb%7Dc" },
    { "x:y%z", "x%3Ay%25z" },
    { "caf\195\169 \0\127", "caf%C3%A9%20%00%7F" },
    { string.rep("k", 128), string.rep("k", 128) },
    { string.rep("k", 129), "%H9094034fb2d0ce2e407c9b260f2806ab2efb352e200722fd6296d9cf1cf7e6f5" },
    -- 43 escaped bytes are 129 once escaped: hashed; 42 and a letter fit.
    { string.rep("{", 43), "%He2a48ddb548587d7f6bcedfece11859afb6243420e650206c4ae58f53b2c7388" },
    { string.rep("{", 42) .. "a", string.rep("%7B", 42) .. "a" },
  }
  for _, c in ipairs(cases) do
    it(string.format("%q", c[1]:sub(1, 20)) .. " (" .. #c[1] .. " bytes)", function()
      assert.are.equal(c[2], keys.encode_part(c[1]))
    end)
  end

  it("never leaves a brace or a colon, whatever the bytes", function()
    for b = 0, 255 do
      local enc = keys.encode_part("k" .. string.char(b) .. "k")
      assert.is_nil(enc:find("[{}:]"), enc)
    end
  end)
end)

describe("slot", function()
  local cases = { { "", 0 }, { "alice", 749 }, { "123456789", 12739 }, { "a%7Bb", 8185 },
    { "%H" .. string.rep("0", 64), 14357 } }
  for _, c in ipairs(cases) do
    it(string.format("%q", c[1]), function() assert.are.equal(c[2], keys.slot(c[1])) end)
  end
end)

describe("state_key", function()
  local function lim(t)
    local l = assert(limits.new(t))
    return l
  end
  local cases = {
    { "api", "alice", nil, { rate = 10, window = "1s" }, "sluice:api{alice}:W1000000", "alice" },
    { "api", "alice", nil, { rate = 10, window = "1m", algorithm = "buckets" },
      "sluice:api{alice}:B60000000/6000000", "alice" },
    { "api", "alice", nil, { rate = 10, window = "1m", algorithm = "buckets", resolution = 15000000 },
      "sluice:api{alice}:B60000000/15000000", "alice" },
    { "a:b", "{x}", "g1", { rate = 10, window = "1h", algorithm = "gcra" },
      "sluice:a%3Ab{g1}:G3600000000:%7Bx%7D", "g1" },
    { "", "k", nil, { rate = 5, window = "1h", algorithm = "log" }, "sluice:{k}:L3600000000", "k" },
    { "z", "k", nil, { rate = 5, window = "24h", algorithm = "decay" }, "sluice:z{k}:D86400000000", "k" },
  }
  for _, c in ipairs(cases) do
    it(c[5], function()
      local key, tag = keys.state_key("sluice:", c[1], c[2], c[3], lim(c[4]))
      assert.are.equal(c[5], key)
      assert.are.equal(c[6], tag)
    end)
  end

  it("keeps a 64 KB key as short as a small one", function()
    local key = keys.state_key("sluice:", "api", string.rep("\255", 65536), nil, lim { rate = 1, window = "1s" })
    assert.is_true(#key < 100, #key)
  end)
end)
