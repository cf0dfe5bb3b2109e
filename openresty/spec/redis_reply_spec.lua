-- sluice.redis's reply reader: one reply read from a socket that hands it
-- over in chunks of any size (receiveany returns what has arrived), as
-- lua-resty-redis would return it.
package.preload["resty.redis"] = function() return {} end
_G.ngx = _G.ngx or { null = setmetatable({}, { __tostring = function() return "null" end }) }
local redis = require "sluice.redis"

-- socket hands out s in chunks of n bytes, then fails with "closed".
local function socket(s, n)
  local pos = 1
  return {
    receiveany = function(_, max)
      if pos > #s then return nil, "closed" end
      local k = math.min(n, max)
      local c = s:sub(pos, pos + k - 1)
      pos = pos + k
      return c
    end,
  }
end

-- A decide.lua-shaped reply: an array of integers, a bulk string (with
-- CRLF inside), a nested array with an error, a status and a negative.
local REPLY = "*6\r\n:1700000000123456\r\n$7\r\nab\r\ncd!\r\n*2\r\n:0\r\n-ERR inner\r\n+OK\r\n:-42\r\n$0\r\n\r\n"
local WANT = { 1700000000123456, "ab\r\ncd!", { 0, { false, "ERR inner" } }, "OK", -42, "" }

describe("read_reply", function()
  it("reads a reply whatever the chunks it arrives in", function()
    for n = 1, #REPLY do
      local got, err = redis.read_reply(socket(REPLY, n))
      assert.is_nil(err)
      assert.are.same(WANT, got)
    end
  end)

  it("returns false and the message of an error reply", function()
    local ok, err = redis.read_reply(socket("-MOVED 3999 127.0.0.1:6381\r\n", 5))
    assert.are.equal(false, ok)
    assert.are.equal("MOVED 3999 127.0.0.1:6381", err)
  end)

  it("returns nil and the socket's error for a reply cut short", function()
    for _, cut in ipairs({ "*3\r\n:1\r\n", "$10\r\nabc", ":12" }) do
      local v, err = redis.read_reply(socket(cut, 2))
      assert.is_nil(v)
      assert.are.equal("closed", err)
    end
  end)

  it("reads nulls as ngx.null", function()
    assert.are.equal(ngx.null, redis.read_reply(socket("$-1\r\n", 3)))
    assert.are.equal(ngx.null, redis.read_reply(socket("*-1\r\n", 3)))
  end)
end)
