-- sluice.request against httplimit: every expected value below is what
-- httplimit's queryValue, Header, Cookie and ClientAddr return for the same
-- input (TestKeyAsGo compares the two through nginx and net/http).
local request = require "sluice.request"

describe("query_value", function()
  local cases = {
    { "token=enc16346", "enc16346" },
    { "token=%65%6e%63%31%36%33%34%36", "enc16346" },
    { "%74oken=%65nc16346", "enc16346" },
    { "token=x&token=enc16346", "x" }, -- the first argument of the name
    { "a=1&&token=v", "v" },
    { "token=&token=a", "" }, -- the first is empty: no key
    { "token", "" },
    { "token=a+b%2Bc", "a b+c" },
    { "token=%zz&token=y", "" }, -- the first does not decode: no key
    { "t%zzoken=x&token=y", "y" }, -- a name that does not decode is another name
    { "token=a=b;token=c", "a=b;token=c" },
    { "TOKEN=a", "" },
  }
  for _, c in ipairs(cases) do
    it(string.format("%q", c[1]), function()
      assert.are.equal(c[2], request.query_value(c[1], "token"))
    end)
  end
end)

describe("trim_space", function()
  it("trims ASCII and Unicode white space", function()
    assert.are.equal("k e y", request.trim_space(" \t\194\160k e y\227\128\128\r\n"))
    assert.are.equal("", request.trim_space(" \226\128\168 "))
    assert.are.equal("\194\161", request.trim_space("\194\161"))
  end)
end)

describe("cookie_value", function()
  local cases = {
    { { "session=abc" }, "abc" },
    { { 'a=1; session="quoted"; session=later' }, "quoted" },
    { { "session=bad\\value; session=good" }, "good" },
    { { "a=1", "session=second-line" }, "second-line" },
    { { "session=; session=b" }, "" },
    { { " session = sp ace " }, " sp ace" },
    { { "other=1" }, nil },
  }
  for _, c in ipairs(cases) do
    it(string.format("%q", table.concat(c[1], " | ")), function()
      assert.are.equal(c[2], request.cookie_value(c[1], "session"))
    end)
  end
end)

describe("addresses", function()
  local cases = {
    { "192.0.2.1", "192.0.2.1" },
    { "192.0.2.1:8080", "192.0.2.1" },
    { "[2001:DB8:0:0:0:0:0:1]:443", "2001:db8::1" },
    { "2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1" },
    { "1:0:0:2:0:0:0:3", "1:0:0:2::3" },
    { "::ffff:203.0.113.5", "203.0.113.5" },
    { "fe80::1%eth0", "fe80::1" },
    { "::", "::" },
    { "01.2.3.4", nil },
    { "1.2.3.256", nil },
    { "[1.2.3.4]:80", nil },
    { "::1:2:3:4:5:6:7:8", nil },
    { "1::2:3:4:5:6:7:8", nil },
    { "2001:db8::1:80", "2001:db8::1:80" },
    { "garbage", nil },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      local a = request.parse_addr(c[1])
      assert.are.equal(c[2], a and request.addr_string(a))
    end)
  end
end)

describe("client_addr", function()
  local trusted = assert(request.parse_trusted({ "127.0.0.0/8", "10.0.0.0/8", "::ffff:192.0.2.0/120" }))
  local function fields(t) return function(name) return t[name] end end
  local cases = {
    { "203.0.113.1", {}, "203.0.113.1" }, -- an untrusted peer is the client
    { "127.0.0.1", { ["x-forwarded-for"] = "198.51.100.1, 10.1.2.3" }, "198.51.100.1" },
    { "127.0.0.1", { ["x-forwarded-for"] = { "198.51.100.1", "10.1.2.3, 10.0.0.2" } }, "198.51.100.1" },
    { "127.0.0.1", { ["x-forwarded-for"] = "10.0.0.1, 10.0.0.2" }, "10.0.0.1" },
    { "127.0.0.1", { ["x-forwarded-for"] = "203.0.113.9, garbage" }, nil },
    { "127.0.0.1", { ["x-forwarded-for"] = "::ffff:203.0.113.5, 192.0.2.9" }, "203.0.113.5" },
    { "127.0.0.1", { ["x-real-ip"] = "198.51.100.2" }, "198.51.100.2" },
    { "127.0.0.1", { ["x-real-ip"] = "198.51.100.2", ["x-forwarded-for"] = "198.51.100.2, 203.0.113.9" }, nil },
    { "127.0.0.1", { ["x-real-ip"] = "not-an-ip" }, nil },
  }
  for i, c in ipairs(cases) do
    it(tostring(i), function()
      assert.are.equal(c[3], (request.client_addr(c[1], fields(c[2]), trusted)))
    end)
  end
  it("refuses a bad trusted proxy", function()
    local p, err = request.parse_trusted({ "10.0.0.0/8", "10.0.0.0/33" })
    assert.is_nil(p)
    assert.truthy(err:find('trusted proxy 1: "10.0.0.0/33"', 1, true), err)
  end)
end)

describe("source", function()
  local function req(args, headers, peer)
    return {
      args = function() return args end,
      header = function(name) return headers[name] end,
      peer = function() return peer or "192.0.2.1" end,
    }
  end
  it("combines parts with | and escapes them", function()
    local src = assert(request.source({ "header:X-API-Key", "query:token" }))
    assert.are.equal("k\\|e\\\\y|a\\|b", src(req("token=a%7Cb", { ["x-api-key"] = "k|e\\y" })))
  end)
  it("takes the first part present, prefixed with its index", function()
    local src = assert(request.source(nil, { "header:X-API-Key", "client-address" }))
    assert.are.equal("1:192.0.2.1", src(req(nil, {})))
    assert.are.equal("0:k", src(req(nil, { ["x-api-key"] = "k" })))
  end)
  it("has no key when a part is missing", function()
    local src = assert(request.source({ "query:token", "client-address" }))
    local k, why = src(req("other=1", {}))
    assert.is_nil(k)
    assert.truthy(why:find("no query argument", 1, true))
  end)
  it("refuses bad sources", function()
    for _, s in ipairs({ "arg:token", "query:", "header:a b", "cookie:", "client" }) do
      local src, err = request.source(s)
      assert.is_nil(src)
      assert.truthy(err:find("key source", 1, true), err)
    end
    assert.is_nil((request.source("query:a", { "query:b" })))
  end)
end)
