-- sluice.redis: runs sluice's scripts on Redis, standalone, behind
-- Sentinel, or Cluster, over cosockets kept alive in nginx's connection
-- pool (one pool per address), in TLS when the URL says so, every call
-- bounded by a timeout in milliseconds.
--
-- In a Cluster each call goes to the master of its keys' hash slot, from a
-- slot map read with CLUSTER SLOTS and kept per worker; MOVED updates the
-- map and retries, ASK retries once on the named node after ASKING, as
-- Redis Cluster clients must.
--
-- Behind Sentinel each worker asks the Sentinels (SENTINEL
-- get-master-addr-by-name, each within the timeout, the last one that
-- answered first) for the master's address and keeps it; a new connection
-- checks with ROLE that it reached a master. A connection error, a
-- READONLY reply or a server that is not a master makes the worker ask the
-- Sentinels again, and a call that failed before Redis ran it is retried
-- once on the new master.
local ok_resty, resty_redis = pcall(require, "resty.redis") -- OpenResty, LuaRocks
if not ok_resty then resty_redis = require "nginx.redis" end -- Debian's lua-nginx-redis

local concat, find, sub, byte = table.concat, string.find, string.sub, string.byte
local ok_new_tab, new_tab = pcall(require, "table.new")
if not ok_new_tab then new_tab = function() return {} end end

local _M = {}
local mt = { __index = _M }

-- MAX_REDIRECTS bounds the MOVED/ASK hops of one call.
local MAX_REDIRECTS = 5

-- slot_maps holds each Cluster's slot map, per worker, by its seeds: slot
-- (0-based) to "host:port". Bounded by the Clusters configured.
local slot_maps = {}

-- masters holds, per worker, each Sentinel-managed master's last known
-- address by the client's name: {host, port, stale}. Bounded by the
-- limiters configured.
local masters = {}

local SCHEMES = {
  ["redis"] = { mode = "standalone" },
  ["rediss"] = { mode = "standalone", tls = true },
  ["redis-sentinel"] = { mode = "sentinel" },
  ["rediss-sentinel"] = { mode = "sentinel", tls = true },
  ["redis-cluster"] = { mode = "cluster" },
  ["rediss-cluster"] = { mode = "cluster", tls = true },
}

local function split_addr(addr)
  local host, port = addr:match("^%[?([^%]]*)%]?:(%d+)$")
  return host, tonumber(port)
end

local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- parse_url reads redisstore's URL forms: redis://[[user]:password@]host:port[/db],
-- redis-sentinel://[[user]:password@]host:port,.../master[/db][?sentinel_username=...&sentinel_password=...],
-- redis-cluster://[[user]:password@]host:port,... and the rediss
-- variants of each (TLS). User and password are percent-decoded; a port
-- left out is 6379 (26379 for Sentinels).
local function parse_url(url)
  local scheme, rest = url:match("^([%w%-]+)://(.*)$")
  local sch = SCHEMES[scheme or ""]
  if not sch then
    return nil, "unsupported Redis URL scheme (want redis://, rediss://, redis-sentinel://, rediss-sentinel://, redis-cluster:// or rediss-cluster://)"
  end
  local u = { mode = sch.mode, tls = sch.tls, cluster = sch.mode == "cluster" }
  local query
  rest, query = rest:match("^([^?]*)%??(.*)$")
  for kv in query:gmatch("[^&]+") do
    local k, v = kv:match("^([^=]*)=?(.*)$")
    if (k == "sentinel_password" or k == "sentinel_username") and u.mode == "sentinel" then
      u[k] = unescape(v)
    else
      return nil, "unknown Redis URL parameter (known: sentinel_username, sentinel_password, for Sentinel URLs)"
    end
  end
  local authority, tail = rest:match("^([^/]*)(.*)$")
  local at = authority:match("^.*()@")
  if at then
    local cred = authority:sub(1, at - 1)
    rest = authority:sub(at + 1) .. tail
    local user, password = cred:match("^([^:]*):(.*)$")
    if not user then user, password = "", cred end
    if user ~= "" then u.user = unescape(user) end
    u.password = unescape(password)
  end
  local hosts, path = rest:match("^([^/]*)/?(.*)$")
  if hosts == "" then return nil, "no host in the Redis URL" end
  u.nodes = {}
  for addr in hosts:gmatch("[^,]+") do
    local host, port = split_addr(addr)
    if not host then host, port = addr:match("^%[?([^%]]*)%]?$"), u.mode == "sentinel" and 26379 or 6379 end
    if not host or host == "" or port < 1 or port > 65535 then return nil, "bad host:port in the Redis URL" end
    u.nodes[#u.nodes + 1] = { host, port }
  end
  if u.mode == "standalone" and #u.nodes ~= 1 then
    return nil, "a standalone Redis URL takes one host:port (use redis-cluster:// or redis-sentinel://)"
  end
  if u.mode == "sentinel" then
    u.master, path = path:match("^([^/]*)/?(.*)$")
    if u.master == "" then return nil, "missing master name after the Sentinel addresses" end
  end
  if path ~= "" then
    if not path:match("^%d+$") then return nil, "the Redis URL's database is not an integer >= 0" end
    u.db = tonumber(path)
    if u.cluster and u.db ~= 0 then return nil, "a Redis Cluster has only database 0" end
  end
  return u
end
_M.parse_url = parse_url

-- new returns a client of the Redis at url. timeout is the bound of each
-- call in ms (connect, TLS handshake, send and read each); pool_size and
-- keepalive (ms) size nginx's connection pool per worker and address.
-- tls (optional) holds the TLS options of rediss URLs: server_name (the
-- name sent and verified; default the URL's first host) and ssl_verify
-- (default true: the server's certificate is verified against
-- lua_ssl_trusted_certificate).
function _M.new(url, timeout, pool_size, keepalive, tls)
  local u, err = parse_url(url)
  if not u then return nil, err end
  tls = tls or {}
  u.timeout, u.pool_size, u.keepalive = timeout, pool_size, keepalive
  if u.tls then
    u.server_name = tls.server_name or u.nodes[1][1]
    u.ssl_verify = tls.ssl_verify ~= false
  end
  local seeds = {}
  for i, n in ipairs(u.nodes) do seeds[i] = n[1] .. ":" .. n[2] end
  u.name = concat(seeds, ",") .. (u.master and "/" .. u.master or "")
  -- Connections differ by address and by what was done on them first
  -- (the TLS handshake and what it verified, AUTH, SELECT): the pool's
  -- name says all of it, the password as a digest.
  u.pool_suffix = concat({ "", u.tls and "tls" or "", u.server_name or "", u.ssl_verify and "v" or "",
    u.db or 0, u.user or "", u.password and ngx.crc32_long(u.password) or "" }, ":")
  if u.mode == "sentinel" then
    u.sentinel_pool_suffix = concat({ "", u.tls and "tls" or "", u.server_name or "", u.ssl_verify and "v" or "",
      u.sentinel_username or "", u.sentinel_password and ngx.crc32_long(u.sentinel_password) or "" }, ":")
  end
  return setmetatable(u, mt)
end

function _M.is_cluster(self) return self.cluster end

-- open connects to host:port, in TLS when the URL says so, and on a new
-- connection sends AUTH with user and password. It returns the
-- connection, or nil and an error (nothing is left open).
local function open(self, host, port, user, password, pool)
  local red = resty_redis:new()
  red:set_timeout(self.timeout)
  local ok, err = red:connect(host, port, { pool_size = self.pool_size, pool = pool })
  if not ok then return nil, err end
  if red:get_reused_times() == 0 then
    if self.tls then
      local sock = rawget(red, "_sock")
      local done
      -- lua-nginx-module 0.10.23 reports success for a handshake that
      -- completes at once but whose certificate then fails verification
      -- (it closes the socket); asked for the session, lua-resty-core
      -- 0.1.25 then fails an assertion instead. The pcall turns that into
      -- the error it is; the session itself is not kept.
      done, ok, err = pcall(sock.sslhandshake, sock, nil, self.server_name, self.ssl_verify)
      if not done then err = "handshake failed (certificate not verified?)" end
      if err then red:close() return nil, "TLS: " .. tostring(err) end
    end
    if password then
      local res
      if user then res, err = red:auth(user, password) else res, err = red:auth(password) end
      if not res then red:close() return nil, "AUTH: " .. tostring(err) end
    end
  end
  return red
end

local function connect(self, host, port)
  local pool = host .. ":" .. port .. self.pool_suffix
  local red, err = open(self, host, port, self.user, self.password, pool)
  if not red then return nil, err end
  if red:get_reused_times() == 0 then
    if self.db and self.db ~= 0 and not self.cluster then
      local res
      res, err = red:select(self.db)
      if not res then red:close() return nil, "SELECT: " .. tostring(err) end
    end
    if self.mode == "sentinel" then
      -- A Sentinel may name a master that has just been demoted: a new
      -- connection checks it reached one.
      local role
      role, err = red:role()
      if type(role) ~= "table" or role[1] ~= "master" then
        red:close()
        return nil, "ROLE: " .. (type(role) == "table" and tostring(role[1]) or tostring(err)) .. ", not a master"
      end
    end
  end
  return red
end

-- release returns red to the pool after a complete reply.
local function release(self, red)
  red:set_keepalive(self.keepalive, self.pool_size)
end

-- A reply is read from a buffer filled with receiveany (whatever the
-- socket holds), and parsed in place: one receive for a reply of
-- hundreds of values rather than one per line, and integers read from
-- the bytes without a string each. The state: st.buf, st.pos.
local RECV = 65536

local function fill(st)
  local data, err = st.sock:receiveany(RECV)
  if not data then return nil, err end
  if st.pos > #st.buf then
    st.buf = data
  else
    st.buf = sub(st.buf, st.pos) .. data
  end
  st.pos = 1
  return true
end

-- integer reads the decimal integer at buf[i .. j].
local function integer(buf, i, j)
  local neg = byte(buf, i) == 45
  if neg then i = i + 1 end
  local n = 0
  for k = i, j do n = n * 10 + byte(buf, k) - 48 end
  return neg and -n or n
end

-- parse reads one reply as lua-resty-redis does: a value, false and the
-- message of an error reply ({false, message} inside an array), or nil
-- and a connection error.
local function parse(st)
  local e
  while true do
    e = find(st.buf, "\r\n", st.pos, true)
    if e then break end
    local ok, err = fill(st)
    if not ok then return nil, err end
  end
  local buf, pos = st.buf, st.pos
  local prefix = byte(buf, pos)
  st.pos = e + 2
  if prefix == 58 then -- ':'
    return integer(buf, pos + 1, e - 1)
  elseif prefix == 36 then -- '$'
    local size = integer(buf, pos + 1, e - 1)
    if size < 0 then return ngx.null end
    while #st.buf - st.pos + 1 < size + 2 do
      local ok, err = fill(st)
      if not ok then return nil, err end
    end
    local from = st.pos
    st.pos = from + size + 2
    return sub(st.buf, from, from + size - 1)
  elseif prefix == 42 then -- '*'
    local n = integer(buf, pos + 1, e - 1)
    if n < 0 then return ngx.null end
    local vals = new_tab(n, 0)
    for i = 1, n do
      local res, err = parse(st)
      if res == nil then return nil, err end
      vals[i] = res == false and { false, err } or res
    end
    return vals
  elseif prefix == 43 then -- '+'
    return sub(buf, pos + 1, e - 1)
  elseif prefix == 45 then -- '-'
    return false, sub(buf, pos + 1, e - 1)
  end
  return nil, "unknown reply prefix: " .. tostring(prefix)
end

-- read_reply reads one reply from sock (nothing else may follow it).
local function read_reply(sock)
  return parse({ sock = sock, buf = "", pos = 1 })
end
_M.read_reply = read_reply

-- command sends name, the script (sha or source), the keys and args as
-- one RESP command, one string, and reads its reply. (Not through
-- lua-resty-redis's methods: they take the arguments as Lua call
-- arguments, and a batch of hundreds of them grows the stack of the
-- request's coroutine, which nginx then clears whole each time it reuses
-- it: thousands of instructions on every later request.)
local function command(red, name, body, keys, args)
  local nk, na = #keys, #args
  local nks = tostring(nk)
  local req = new_tab(5 * (nk + na) + 16, 0)
  req[1], req[2], req[3] = "*", 3 + nk + na, "\r\n"
  req[4], req[5], req[6], req[7], req[8] = "$", #name, "\r\n", name, "\r\n"
  req[9], req[10], req[11], req[12], req[13] = "$", #body, "\r\n", body, "\r\n"
  req[14], req[15], req[16], req[17], req[18] = "$", #nks, "\r\n", nks, "\r\n"
  local n = 18
  for i = 1, nk do
    local a = keys[i]
    req[n + 1], req[n + 2], req[n + 3], req[n + 4], req[n + 5] = "$", #a, "\r\n", a, "\r\n"
    n = n + 5
  end
  for i = 1, na do
    local a = args[i]
    if type(a) ~= "string" then a = tostring(a) end
    req[n + 1], req[n + 2], req[n + 3], req[n + 4], req[n + 5] = "$", #a, "\r\n", a, "\r\n"
    n = n + 5
  end
  local sock = rawget(red, "_sock")
  local ok, err = sock:send(concat(req, "", 1, n))
  if not ok then return nil, err end
  return read_reply(sock)
end

-- run_script runs script (src, sha) on red: EVALSHA, and EVAL when the
-- server does not know the script. It returns the reply; or false and a
-- Redis error reply (the connection is usable); or nil and a connection
-- error (the connection is closed).
local function run_script(red, script, keys, args, asking)
  if asking then
    local ok, err = red:asking()
    if not ok then return ok, err end
  end
  local res, err = command(red, "EVALSHA", script.sha, keys, args)
  if res == false and find(err, "^NOSCRIPT") then
    if asking then red:asking() end
    res, err = command(red, "EVAL", script.src, keys, args)
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

-- owner returns the address of slot's master in this worker's slot map,
-- without I/O; nil when the map does not know it (or outside a Cluster).
function _M.owner(self, slot)
  local map = self.cluster and slot_maps[self.name]
  return map and map.slots[slot]
end

-- sentinel_master asks the Sentinels, the one that answered last first,
-- for the master's address and keeps it. With every Sentinel down or
-- silent it keeps the address it had, if any.
local function sentinel_master(self)
  local m = masters[self.name]
  local last
  local n = #self.nodes
  local first = m and m.sentinel or 1
  for i = 0, n - 1 do
    local idx = (first + i - 1) % n + 1
    local s = self.nodes[idx]
    local red, err = open(self, s[1], s[2], self.sentinel_username, self.sentinel_password,
      s[1] .. ":" .. s[2] .. ":sentinel" .. self.sentinel_pool_suffix)
    if red then
      local res
      res, err = red:sentinel("get-master-addr-by-name", self.master)
      if res == nil then red:close() else release(self, red) end
      if type(res) == "table" and res[1] and res[2] then
        local host, port = res[1], tonumber(res[2])
        if m and (m[1] ~= host or m[2] ~= port) then
          ngx.log(ngx.WARN, "sluice: Sentinel ", s[1], ":", s[2], " names ", host, ":", port,
            " as master of ", self.master, " (was ", m[1], ":", m[2], ")")
        end
        m = { host, port, sentinel = idx }
        masters[self.name] = m
        return m
      end
      err = err or "master unknown to this Sentinel"
    end
    last = err
  end
  if m then
    m.stale = true
    return m
  end
  return nil, "no Sentinel named master " .. self.master .. ": " .. tostring(last)
end

-- target returns the address to send to: the one node of a standalone
-- URL, or the master the Sentinels named (asking them when none is known
-- or the known one is stale).
local function target(self)
  if self.mode ~= "sentinel" then return self.nodes[1] end
  local m = masters[self.name]
  if m and not m.stale then return m end
  return sentinel_master(self)
end

-- forget marks the Sentinel master as stale: the next call asks the
-- Sentinels again.
local function forget(self)
  local m = masters[self.name]
  if m then m.stale = true end
end

-- eval runs script on the keys (all in hash slot slot) and returns its
-- reply, or nil and an error.
function _M.eval(self, script, keys, args, slot)
  if not self.cluster then
    for attempt = 1, 2 do
      local n, err = target(self)
      if not n then return nil, err end
      local red
      red, err = connect(self, n[1], n[2])
      if not red then
        -- Nothing was sent: after a failover the new master can take it.
        if self.mode ~= "sentinel" then return nil, err end
        forget(self)
        local fresh = target(self)
        if attempt == 2 or not fresh or (fresh[1] == n[1] and fresh[2] == n[2]) then return nil, err end
      else
        local res
        res, err = run_script(red, script, keys, args)
        if res == nil then
          -- Redis may have run it: never sent again, but the master is
          -- asked for again on the next call.
          red:close()
          if self.mode == "sentinel" then forget(self) end
          return nil, err
        end
        if res == false and self.mode == "sentinel" and find(err, "^READONLY") then
          -- A demoted master refuses the script's writes: nothing ran.
          red:close()
          forget(self)
          if attempt == 2 then return nil, err end
        else
          release(self, red)
          if res == false then return nil, err end
          return res
        end
      end
    end
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
