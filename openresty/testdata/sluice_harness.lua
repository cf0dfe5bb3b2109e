-- sluice_harness: the test endpoints through which the Go tests drive the
-- module in nginx. A request body names a check, one field per line, every
-- string as "x" and its hex (keys may be any bytes):
--
--   redis <hex URL>       prefix <hex>        now <µs, or empty>
--   cost <n>              group <hex>         shadow <0|1>
--   edge <0|1>            (1: lim:decide, behind the edge; 0: lim:check)
--   tls <server name hex> <verify 0|1>   (rediss URLs)
--   hit <zone hex> <key hex> <algorithm> <rate> <window µs> <resolution µs> <shadow 0|1>
--
-- The reply is "err <message>", or "ok <allowed> <shadowed> <source>
-- <retry_after µs>" and one line per hit: "hit <allowed> <shadow> <used>
-- <remaining> <retry_after µs> <reset_after µs>".
local sluice = require "sluice"

local _M = {}

-- limiters are kept per (URL, prefix, options) in the worker, as an
-- application keeps its limiters.
local limiters = {}

-- unhex decodes "x" followed by hex (the "x" keeps an empty string a field).
local function unhex(s)
  s = (s or "x"):sub(2)
  return (s:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end))
end

local function parse(body)
  local c, o = { hits = {}, cost = 1 }, {}
  for line in body:gmatch("[^\n]+") do
    local f = {}
    for w in line:gmatch("%S+") do f[#f + 1] = w end
    local k = f[1]
    if k == "redis" then o.redis = unhex(f[2])
    elseif k == "prefix" then o.prefix = unhex(f[2])
    elseif k == "now" then o.now = tonumber(f[2])
    elseif k == "cost" then c.cost = tonumber(f[2])
    elseif k == "group" then c.group = unhex(f[2])
    elseif k == "shadow" then c.shadow = f[2] == "1"
    elseif k == "edge" then o.edge = f[2] == "1"
    elseif k == "policy" then o.policy = f[2]
    elseif k == "timeout" then o.timeout = tonumber(f[2])
    elseif k == "async" then o.async = f[2] == "1"
    elseif k == "tls" then o.server_name, o.ssl_verify = unhex(f[2]), f[3] == "1"
    elseif k == "hit" then
      c.hits[#c.hits + 1] = {
        zone = unhex(f[2]), key = unhex(f[3]),
        limit = { algorithm = f[4], rate = tonumber(f[5]), window = tonumber(f[6]),
          resolution = tonumber(f[7]), shadow = f[8] == "1" },
      }
    end
  end
  if c.group == "" then c.group = nil end
  return c, o
end

local function limiter(o)
  local k = table.concat({ o.redis, o.prefix or "", o.policy or "", tostring(o.timeout), o.now and "now" or "",
    tostring(o.edge), tostring(o.async), o.server_name or "", tostring(o.ssl_verify) }, "\0")
  local lim = limiters[k]
  if lim then return lim end
  local err
  lim, err = sluice.new({
    redis = o.redis, prefix = o.prefix, policy = o.policy, timeout = o.timeout or 2000,
    padding = o.now and 10000 or 0, breaker = o.edge and "sluice_breaker" or nil,
    deny_cache = o.edge and not o.async and "sluice_deny" or nil, async = o.async,
    server_name = o.server_name, ssl_verify = o.ssl_verify,
  })
  if not lim then return nil, err end
  limiters[k] = lim
  return lim
end

local function reply(d, err)
  if not d then
    ngx.say("err ", err)
    return
  end
  local out = { string.format("ok %d %d %s %.0f", d.allowed and 1 or 0, d.shadowed and 1 or 0, d.source, d.retry_after or 0) }
  for _, h in ipairs(d.hits) do
    out[#out + 1] = string.format("hit %d %d %.17g %.0f %.0f %.0f", h.allowed and 1 or 0, h.shadow and 1 or 0,
      h.used, h.remaining, h.retry_after, h.reset_after)
  end
  ngx.say(table.concat(out, "\n"))
end

local function body()
  ngx.req.read_body()
  local b = ngx.req.get_body_data()
  if not b then
    local f = ngx.req.get_body_file()
    if f then
      local fh = io.open(f, "rb")
      b = fh:read("*a")
      fh:close()
    end
  end
  return b or ""
end

-- check answers POST /check.
function _M.check()
  local c, o = parse(body())
  local lim, err = limiter(o)
  if not lim then return reply(nil, err) end
  if o.edge then return reply(lim:decide(c, o.now)) end
  return reply(lim:check(c, o.now))
end

-- reset answers POST /reset: "ok" or "err <message>".
function _M.reset()
  local c, o = parse(body())
  local lim, err = limiter(o)
  if not lim then return reply(nil, err) end
  local ok
  ok, err = lim:reset(c)
  if not ok then return ngx.say("err ", err) end
  ngx.say("ok")
end

return _M
