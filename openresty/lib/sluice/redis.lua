-- sluice.redis: runs sluice's scripts on Redis, standalone or Cluster,
-- over cosockets kept alive in nginx's connection pool, every call bounded
-- by a timeout in milliseconds. In a Cluster each call goes to the master
-- of its keys' hash slot, from a slot map read with CLUSTER SLOTS and kept
-- per worker; MOVED updates the map and retries, ASK retries once on the
-- named node after ASKING, as Redis Cluster clients must.
local resty_redis = require "nginx.redis"

local concat, unpack, find, sub = table.concat, unpack, string.find, string.sub

local _M = {}
local mt = { __index = _M }

-- MAX_REDIRECTS bounds the MOVED/ASK hops of one call.
local MAX_REDIRECTS = 5

-- slot_maps holds each Cluster's slot map, per worker, by its seeds: slot
-- (0-based) to "host:port". Bounded by the Clusters configured.
local slot_maps = {}

local function split_addr(addr)
  local host, port = addr:match("^%[?([^%]]*)%]?:(%d+)$")
  return host, tonumber(port)
end

-- parse_url reads redis://[:password@]host:port[/db] and
-- redis-cluster://[:password@]host:port,host:port (redisstore's URL forms
-- without TLS and Sentinel).
local function parse_url(url)
  local scheme, rest = url:match("^([%w%-]+)://(.*)$")
  if scheme ~= "redis" and scheme ~= "redis-cluster" then
    return nil, "unsupported Redis URL scheme (want redis:// or redis-cluster://)"
  end
  local user, password
  local at = rest:find("@[^@]*$")
  if at then
    local cred = rest:sub(1, at - 1)
    rest = rest:sub(at + 1)
    user, password = cred:match("^([^:]*):(.*)$")
    if not user then password = cred end
    if user == "" then user = nil end
  end
  local hosts, db = rest:match("^([^/]*)/?(%d*)$")
  if not hosts or hosts == "" then return nil, "no host in the Redis URL" end
  local nodes = {}
  for addr in hosts:gmatch("[^,]+") do
    local host, port = split_addr(addr)
    if not host then return nil, "bad host:port in the Redis URL" end
    nodes[#nodes + 1] = { host, port }
  end
  if scheme == "redis" and #nodes ~= 1 then return nil, "redis:// takes one host:port" end
  return { cluster = scheme == "redis-cluster", nodes = nodes, user = user, password = password,
    db = tonumber(db) }
end

-- new returns a client of the Redis at url. timeout is the bound of each
-- call in ms (connect, send and read each); pool_size and keepalive (ms)
-- size nginx's connection pool per worker.
function _M.new(url, timeout, pool_size, keepalive)
  local u, err = parse_url(url)
  if not u then return nil, err end
  u.timeout, u.pool_size, u.keepalive = timeout, pool_size, keepalive
  local seeds = {}
  for i, n in ipairs(u.nodes) do seeds[i] = n[1] .. ":" .. n[2] end
  u.name = concat(seeds, ",")
  return setmetatable(u, mt)
end

function _M.is_cluster(self) return self.cluster end

local function connect(self, host, port)
  local red = resty_redis:new()
  red:set_timeout(self.timeout)
  local ok, err = red:connect(host, port, { pool_size = self.pool_size })
  if not ok then return nil, err end
  if red:get_reused_times() == 0 then
    if self.password then
      local res
      if self.user then res, err = red:auth(self.user, self.password) else res, err = red:auth(self.password) end
      if not res then red:close() return nil, "AUTH: " .. tostring(err) end
    end
    if self.db and self.db ~= 0 and not self.cluster then
      local res
      res, err = red:select(self.db)
      if not res then red:close() return nil, "SELECT: " .. tostring(err) end
    end
  end
  return red
end

-- release returns red to the pool after a complete reply.
local function release(self, red)
  red:set_keepalive(self.keepalive, self.pool_size)
end

-- run_script runs script (src, sha) on red: EVALSHA, and EVAL when the
-- server does not know the script. It returns the reply; or false and a
-- Redis error reply (the connection is usable); or nil and a connection
-- error (the connection is closed).
local function run_script(red, script, keys, args, asking)
  local cmd = { script.sha, #keys }
  for i = 1, #keys do cmd[#cmd + 1] = keys[i] end
  for i = 1, #args do cmd[#cmd + 1] = args[i] end
  if asking then
    local ok, err = red:asking()
    if not ok then return ok, err end
  end
  local res, err = red:evalsha(unpack(cmd))
  if res == false and find(err, "^NOSCRIPT") then
    cmd[1] = script.src
    if asking then red:asking() end
    res, err = red:eval(unpack(cmd))
  end
  return res, err
end

-- refresh reads the Cluster's slot map from the first node that answers.
local function refresh(self)
  local map = slot_maps[self.name] or {}
  local last
  local tried = {}
  local candidates = {}
  for _, n in ipairs(self.nodes) do candidates[#candidates + 1] = n end
  for _, addr in pairs(map.known or {}) do
    local h, p = split_addr(addr)
    candidates[#candidates + 1] = { h, p }
  end
  for _, n in ipairs(candidates) do
    local key = n[1] .. ":" .. n[2]
    if not tried[key] then
      tried[key] = true
      local red, err = connect(self, n[1], n[2])
      if red then
        local res
        res, err = red:cluster("slots")
        if type(res) == "table" then
          release(self, red)
          local slots, known = {}, {}
          for _, r in ipairs(res) do
            local addr = r[3][1] .. ":" .. r[3][2]
            known[addr] = addr
            for s = r[1], r[2] do slots[s] = addr end
          end
          slot_maps[self.name] = { slots = slots, known = known }
          return slot_maps[self.name]
        end
        if res == nil then red:close() else release(self, red) end
      end
      last = err
    end
  end
  return nil, "CLUSTER SLOTS: no node answered: " .. tostring(last)
end

-- node returns the address of slot's master.
local function node(self, slot)
  local map = slot_maps[self.name]
  if not map or map.stale or not map.slots[slot] then
    local fresh, err = refresh(self)
    if fresh then
      map = fresh
    elseif not map then
      return nil, err
    end
  end
  local addr = map.slots[slot]
  if not addr then return nil, "slot " .. slot .. " has no master" end
  return addr
end

-- eval runs script on the keys (all in hash slot slot) and returns its
-- reply, or nil and an error.
function _M.eval(self, script, keys, args, slot)
  if not self.cluster then
    local n = self.nodes[1]
    local red, err = connect(self, n[1], n[2])
    if not red then return nil, err end
    local res
    res, err = run_script(red, script, keys, args)
    if res == nil then red:close() return nil, err end
    release(self, red)
    if res == false then return nil, err end
    return res
  end
  local addr, err = node(self, slot)
  if not addr then return nil, err end
  local asking = false
  for _ = 0, MAX_REDIRECTS do
    local host, port = split_addr(addr)
    local red
    red, err = connect(self, host, port)
    if not red then
      -- A failover may have moved the slot: read the map again, and try
      -- the slot's master once more if it changed.
      local fresh = refresh(self)
      if not fresh or not fresh.slots[slot] or fresh.slots[slot] == addr then
        local map = slot_maps[self.name]
        if map then map.stale = true end
        return nil, err
      end
      addr, asking = fresh.slots[slot], false
      goto continue
    end
    local res
    res, err = run_script(red, script, keys, args, asking)
    if res == nil then red:close() return nil, err end
    release(self, red)
    if res ~= false then return res end
    asking = false
    if find(err, "^MOVED ") then
      addr = sub(err, find(err, " [^ ]*$") + 1)
      local map = slot_maps[self.name]
      if map then
        map.slots[slot] = addr
        map.stale = true
      end
    elseif find(err, "^ASK ") then
      addr = sub(err, find(err, " [^ ]*$") + 1)
      asking = true
    else
      return nil, err
    end
    ::continue::
  end
  return nil, "too many Cluster redirections"
end

return _M
