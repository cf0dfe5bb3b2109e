-- sluice.redis's URL forms, as redisstore's parseURL reads them. The
-- client library is not needed to parse: a stub stands for it.
package.preload["resty.redis"] = function() return {} end
local redis = require "sluice.redis"

describe("parse_url", function()
  it("reads a standalone URL with credentials and a database", function()
    local u = assert(redis.parse_url("redis://bob:s%40cret@127.0.0.1:6380/2"))
    assert.are.same({ { "127.0.0.1", 6380 } }, u.nodes)
    assert.are.equal("standalone", u.mode)
    assert.are.equal("bob", u.user)
    assert.are.equal("s@cret", u.password)
    assert.are.equal(2, u.db)
    assert.is_nil(u.tls)
  end)

  it("reads a password alone and a default port", function()
    local u = assert(redis.parse_url("rediss://secret@redis.example"))
    assert.are.same({ { "redis.example", 6379 } }, u.nodes)
    assert.is_nil(u.user)
    assert.are.equal("secret", u.password)
    assert.is_true(u.tls)
  end)

  it("reads Sentinels, the master name and the Sentinels' credentials", function()
    local u = assert(redis.parse_url(
      "redis-sentinel://:pw@10.0.0.1:26380,10.0.0.2/mymaster/3?sentinel_username=sn&sentinel_password=sp%26q"))
    assert.are.equal("sentinel", u.mode)
    assert.are.same({ { "10.0.0.1", 26380 }, { "10.0.0.2", 26379 } }, u.nodes)
    assert.are.equal("mymaster", u.master)
    assert.are.equal(3, u.db)
    assert.are.equal("pw", u.password)
    assert.are.equal("sn", u.sentinel_username)
    assert.are.equal("sp&q", u.sentinel_password)
  end)

  it("reads Cluster seeds over TLS", function()
    local u = assert(redis.parse_url("rediss-cluster://h1:7000,h2:7001"))
    assert.is_true(u.cluster)
    assert.is_true(u.tls)
    assert.are.same({ { "h1", 7000 }, { "h2", 7001 } }, u.nodes)
  end)

  local bad = {
    "http://h:1", "redis://", "redis://h1:1,h2:2", "redis://h:0", "redis://h:1/x",
    "redis-sentinel://h:1", "redis-sentinel://h:1/", "redis-cluster://h:1/1",
    "redis://h:1?sentinel_password=x", "redis-sentinel://h:1/m?foo=1",
  }
  for _, url in ipairs(bad) do
    it("refuses " .. url, function()
      local u, err = redis.parse_url(url)
      assert.is_nil(u)
      assert.is_string(err)
    end)
  end
end)
