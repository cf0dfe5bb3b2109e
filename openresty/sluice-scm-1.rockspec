-- The OpenResty module as a LuaRocks package (docs/openresty.md,
-- Installation). TestRockspec fails when a file of lib/ is missing here or
-- a module here is not in lib/.
rockspec_format = "3.0"
package = "sluice"
version = "scm-1"
source = {
  url = "git+https://github.com/sluicehq/sluice.git",
}
description = {
  summary = "sluice's distributed rate limiter in nginx: exact limits shared with Go on one Redis",
  detailed = [[
An OpenResty (lua-nginx-module) module that decides each request in the
nginx worker with sluice's own Redis scripts, keys and replies, so nginx
workers and Go processes on one Redis (standalone, Sentinel or Cluster)
share one exact limit.]],
  homepage = "https://github.com/sluicehq/sluice",
}
dependencies = {
  "lua-resty-redis",
}
build = {
  type = "builtin",
  modules = {
    ["sluice"] = "openresty/lib/sluice.lua",
    ["sluice.async"] = "openresty/lib/sluice/async.lua",
    ["sluice.edge"] = "openresty/lib/sluice/edge.lua",
    ["sluice.http"] = "openresty/lib/sluice/http.lua",
    ["sluice.keys"] = "openresty/lib/sluice/keys.lua",
    ["sluice.limits"] = "openresty/lib/sluice/limits.lua",
    ["sluice.protocol"] = "openresty/lib/sluice/protocol.lua",
    ["sluice.redis"] = "openresty/lib/sluice/redis.lua",
    ["sluice.request"] = "openresty/lib/sluice/request.lua",
    ["sluice.scripts"] = "openresty/lib/sluice/scripts.lua",
  },
}
