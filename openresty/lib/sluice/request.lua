-- sluice.request: the key of a request, read as sluice serve and httplimit
-- read it (httplimit/key.go), so that a limit keyed in nginx and one keyed
-- by a Go process count the same client under the same key.
--
-- A key source is a string in the Go config's syntax:
--
--   "query:NAME"      the first query argument named NAME, its name and
--                     value percent-decoded ("+" is a space)
--   "header:NAME"     the first NAME header field, surrounding white space
--                     removed
--   "cookie:NAME"     the first cookie NAME, quotes removed
--   "client-address"  the client's IP address in canonical form: the TCP
--                     peer, or with trusted proxies X-Forwarded-For read
--                     from the right (X-Real-IP when there is none)
--
-- source(from, first_of, trusted) compiles one or several of them: every
-- part joined with "|" (Combine), or the first part present, prefixed with
-- its index (FirstOf). The parsing functions take strings and have no ngx
-- dependency, so that busted tests them (spec/request_spec.lua); read
-- below them is the only part that asks nginx.
local byte, sub, find, char, format, gsub = string.byte, string.sub, string.find, string.char, string.format, string.gsub
local concat, tonumber = table.concat, tonumber

local _M = {}

-- HEX gives the value of a hex digit's byte.
local HEX = {}
for i = 0, 9 do HEX[48 + i] = i end
for i = 0, 5 do HEX[65 + i], HEX[97 + i] = 10 + i, 10 + i end

-- escaped reports whether s holds a "%" or a "+" (plain finds, which
-- LuaJIT compiles; a pattern it does not).
local function escaped(s)
  return find(s, "%", 1, true) or find(s, "+", 1, true)
end

local function hex_char(h) return char(tonumber(h, 16)) end

-- unescape_query is url.QueryUnescape: "%XX" is the byte XX, "+" a space;
-- a "%" not followed by two hex digits makes it nil.
function _M.unescape_query(s)
  if not escaped(s) then return s end
  local i = find(s, "%", 1, true)
  while i do
    if not HEX[byte(s, i + 1) or 0] or not HEX[byte(s, i + 2) or 0] then return nil end
    i = find(s, "%", i + 3, true)
  end
  -- "+" first: a "%2B" decodes to a "+" that stays.
  s = gsub(s, "%+", " ")
  return (gsub(s, "%%(%x%x)", hex_char))
end

-- has_escape reports whether s[i..j] holds a "%" or a "+"; equal_at
-- whether s[i..] starts with name. Byte loops, which LuaJIT compiles, and
-- no substring made: most arguments are neither the key nor escaped.
local function has_escape(s, i, j)
  for k = i, j do
    local b = byte(s, k)
    if b == 37 or b == 43 then return true end
  end
  return false
end

local function equal_at(s, i, name, n)
  for k = 1, n do
    if byte(s, i + k - 1) ~= byte(name, k) then return false end
  end
  return true
end

-- query_value is httplimit's queryValue: the value of the first argument
-- of the raw query whose name, decoded, is name, decoded; "" when there
-- is none or it does not decode. Arguments are separated by "&" only.
function _M.query_value(raw, name)
  local unescape = _M.unescape_query
  local pos, len, n = 1, #raw, #name
  while pos <= len do
    local amp = find(raw, "&", pos, true) or len + 1
    local eq = find(raw, "=", pos, true)
    if eq and eq > amp then eq = nil end
    local kend = (eq or amp) - 1
    local match = kend - pos + 1 == n and equal_at(raw, pos, name, n)
    if not match and has_escape(raw, pos, kend) then
      match = unescape(sub(raw, pos, kend)) == name
    end
    if match then
      if not eq then return "" end
      return unescape(sub(raw, eq + 1, amp - 1)) or ""
    end
    pos = amp + 1
  end
  return ""
end

-- SPACE2 and SPACE3 are the UTF-8 encodings of Unicode's white space
-- beyond ASCII (unicode.IsSpace): U+0085, U+00A0, then U+1680,
-- U+2000-U+200A, U+2028, U+2029, U+202F, U+205F and U+3000.
local SPACE2 = { ["\194\133"] = true, ["\194\160"] = true }
local SPACE3 = { ["\225\154\128"] = true, ["\226\128\168"] = true, ["\226\128\169"] = true,
  ["\226\128\175"] = true, ["\226\129\159"] = true, ["\227\128\128"] = true }
for c = 0x80, 0x8a do SPACE3["\226\128" .. char(c)] = true end

local function ascii_space(b) return b == 32 or (b >= 9 and b <= 13) end

-- trim_space is strings.TrimSpace: leading and trailing white space
-- (ASCII and Unicode's) removed.
function _M.trim_space(s)
  local i, j = 1, #s
  while i <= j do
    local b = byte(s, i)
    if ascii_space(b) then
      i = i + 1
    elseif SPACE2[sub(s, i, i + 1)] then
      i = i + 2
    elseif SPACE3[sub(s, i, i + 2)] then
      i = i + 3
    else
      break
    end
  end
  while j >= i do
    local b = byte(s, j)
    if ascii_space(b) then
      j = j - 1
    elseif j - 1 >= i and SPACE2[sub(s, j - 1, j)] then
      j = j - 2
    elseif j - 2 >= i and SPACE3[sub(s, j - 2, j)] then
      j = j - 3
    else
      break
    end
  end
  return sub(s, i, j)
end

-- trim_ascii is textproto.TrimString: spaces, tabs, CR and LF removed at
-- both ends.
local function trim_ascii(s)
  return (s:gsub("^[ \t\r\n]+", ""):gsub("[ \t\r\n]+$", ""))
end

-- valid_cookie_byte is net/http's validCookieValueByte.
local function valid_cookie_value(v)
  for i = 1, #v do
    local b = byte(v, i)
    if b < 0x20 or b >= 0x7f or b == 34 or b == 59 or b == 92 then return false end
  end
  return true
end

-- MAX_COOKIES is net/http's limit on the cookies of a request: past it,
-- a request has none.
_M.MAX_COOKIES = 3000

-- cookie_value is Request.Cookie(name).Value over the Cookie header
-- lines: the first well-formed cookie named name, surrounding quotes
-- removed; nil when there is none.
function _M.cookie_value(lines, name)
  local count = 0
  for _, line in ipairs(lines) do
    local _, n = line:gsub(";", "")
    count = count + n + 1
  end
  if count > _M.MAX_COOKIES then return nil end
  for _, line in ipairs(lines) do
    line = trim_ascii(line)
    local pos, len = 1, #line
    while pos <= len do
      local semi = find(line, ";", pos, true)
      local part = trim_ascii(sub(line, pos, (semi or len + 1) - 1))
      pos = semi and semi + 1 or len + 1
      if part ~= "" then
        local eq = find(part, "=", 1, true)
        local k, v = part, ""
        if eq then k, v = sub(part, 1, eq - 1), sub(part, eq + 1) end
        if trim_ascii(k) == name then
          if #v > 1 and byte(v, 1) == 34 and byte(v, #v) == 34 then v = sub(v, 2, -2) end
          if valid_cookie_value(v) then return v end
        end
      end
    end
  end
  return nil
end

-- IP addresses, as net/netip parses and prints them. An address is a
-- list of 4 or 16 byte values.

-- parse_ipv4 is netip's parseIPv4Fields over s: four decimal fields
-- without leading zeros, each at most 255.
local function parse_ipv4(s)
  local out, val, digits = {}, 0, 0
  local len = #s
  for i = 1, len do
    local b = byte(s, i)
    if b >= 48 and b <= 57 then
      if digits == 1 and val == 0 then return nil end
      val, digits = val * 10 + b - 48, digits + 1
      if val > 255 then return nil end
    elseif b == 46 then
      if i == 1 or i == len or byte(s, i - 1) == 46 or #out == 3 then return nil end
      out[#out + 1], val, digits = val, 0, 0
    else
      return nil
    end
  end
  if #out < 3 then return nil end
  out[4] = val
  return out
end

-- parse_ipv6 is netip's parseIPv6, the zone dropped.
local function parse_ipv6(s)
  local pct = find(s, "%", 1, true)
  if pct then
    if pct == #s then return nil end
    s = sub(s, 1, pct - 1)
  end
  local ip, ellipsis, i = {}, nil, 0 -- i: bytes filled
  for k = 1, 16 do ip[k] = 0 end
  if sub(s, 1, 2) == "::" then
    ellipsis, s = 0, sub(s, 3)
    if s == "" then return ip end
  end
  while i < 16 do
    local off, acc = 0, 0
    while off < #s do
      local h = HEX[byte(s, off + 1)]
      if not h then break end
      acc = acc * 16 + h
      if off > 3 or acc > 65535 then return nil end
      off = off + 1
    end
    if off == 0 then return nil end
    if byte(s, off + 1) == 46 then -- a trailing IPv4 address
      if (not ellipsis and i ~= 12) or i + 4 > 16 then return nil end
      local v4 = parse_ipv4(s)
      if not v4 then return nil end
      for k = 1, 4 do ip[i + k] = v4[k] end
      s, i = "", i + 4
      break
    end
    ip[i + 1], ip[i + 2] = math.floor(acc / 256), acc % 256
    i = i + 2
    s = sub(s, off + 1)
    if s == "" then break end
    if byte(s, 1) ~= 58 or #s == 1 then return nil end
    s = sub(s, 2)
    if byte(s, 1) == 58 then
      if ellipsis then return nil end
      ellipsis, s = i, sub(s, 2)
      if s == "" then break end
    end
  end
  if s ~= "" then return nil end
  if i < 16 then
    if not ellipsis then return nil end
    local n = 16 - i
    for j = i, ellipsis + 1, -1 do ip[j + n] = ip[j] end
    for j = ellipsis + 1, ellipsis + n do ip[j] = 0 end
  elseif ellipsis then
    return nil
  end
  return ip
end

-- unmap returns a's IPv4 address when a is IPv4-mapped IPv6.
local function unmap(a)
  if #a ~= 16 or a[11] ~= 255 or a[12] ~= 255 then return a end
  for k = 1, 10 do
    if a[k] ~= 0 then return a end
  end
  return { a[13], a[14], a[15], a[16] }
end

-- parse_ip_raw is netip.ParseAddr, the zone dropped.
local function parse_ip_raw(s)
  local p = find(s, "[.:%%]")
  if not p then return nil end
  local c = byte(s, p)
  if c == 46 then return parse_ipv4(s) end
  if c == 58 then return parse_ipv6(s) end
  return nil
end

-- parse_ip is parse_ip_raw, unmapped.
local function parse_ip(s)
  local a = parse_ip_raw(s)
  return a and unmap(a)
end

-- parse_addr is httplimit's parseAddr: an IP address, or one with a
-- port ("192.0.2.1:1234", "[2001:db8::1]:1234"); nil otherwise.
function _M.parse_addr(s)
  local a = parse_ip(s)
  if a then return a end
  local colon = s:match("^.*():")
  if not colon then return nil end
  local host, port = sub(s, 1, colon - 1), sub(s, colon + 1)
  if host == "" or port == "" or not find(port, "^%d+$") or tonumber(port) > 65535 then return nil end
  local v6 = byte(host, 1) == 91
  if v6 then
    if #host < 2 or byte(host, #host) ~= 93 then return nil end
    host = sub(host, 2, -2)
  end
  local p = find(host, "[.:%%]")
  local is6 = p and byte(host, p) ~= 46
  if not p or v6 ~= is6 then return nil end
  -- The family is the written one: "[::ffff:1.2.3.4]:80" is IPv6, then
  -- unmapped.
  local ip = is6 and parse_ipv6(host) or parse_ipv4(host)
  return ip and unmap(ip)
end

-- addr_string is netip.Addr.String: dotted IPv4, RFC 5952 IPv6 (lower-case
-- hex, the first longest run of two or more zero groups as "::").
function _M.addr_string(a)
  if #a == 4 then return a[1] .. "." .. a[2] .. "." .. a[3] .. "." .. a[4] end
  local g = {}
  for k = 0, 7 do g[k] = a[2 * k + 1] * 256 + a[2 * k + 2] end
  local zs, ze = -1, -1
  for k = 0, 7 do
    local j = k
    while j < 8 and g[j] == 0 do j = j + 1 end
    if j - k >= 2 and j - k > ze - zs then zs, ze = k, j end
  end
  local out, k = {}, 0
  while k < 8 do
    if k == zs then
      out[#out + 1] = "::"
      k = ze
      if k >= 8 then break end
    elseif k > 0 then
      out[#out + 1] = ":"
    end
    out[#out + 1] = format("%x", g[k])
    k = k + 1
  end
  return concat(out)
end

-- parse_prefix is netip.ParsePrefix and Masked's input, unmapped as
-- ParseTrustedProxies does: {addr, bits}, bits -1 for an IPv4-mapped
-- prefix shorter than 96 bits (which holds no address); nil if s is not a
-- prefix.
local function parse_prefix(s)
  local slash = s:match("^.*()/")
  if not slash then return nil end
  local host, bits = sub(s, 1, slash - 1), sub(s, slash + 1)
  if find(host, "%", 1, true) or not find(bits, "^%d+$") or (#bits > 1 and byte(bits, 1) == 48) then return nil end
  local a = parse_ip_raw(host)
  local n = tonumber(bits)
  if not a or n > #a * 8 then return nil end
  local u = unmap(a)
  if u ~= a then n = n >= 96 and n - 96 or -1 end
  return { addr = u, bits = n }
end

-- parse_trusted is httplimit.ParseTrustedProxies: CIDR prefixes or single
-- addresses. It returns the prefixes ({addr, bits}), or nil and an error
-- quoting the bad element.
function _M.parse_trusted(list)
  if type(list) ~= "table" then list = { list } end
  local out = {}
  for i, s in ipairs(list) do
    s = _M.trim_space(tostring(s))
    local p = parse_prefix(s)
    if not p then
      local a = parse_ip(s)
      p = a and { addr = a, bits = #a * 8 }
    end
    if not p then
      return nil, format("trusted proxy %d: %q is neither an IP address nor a CIDR prefix such as 10.0.0.0/8", i - 1, s)
    end
    out[#out + 1] = p
  end
  return out
end

-- contains reports whether prefix p holds address a (same family).
local function contains(p, a)
  local pa = p.addr
  if #pa ~= #a then return false end
  local bits = p.bits
  if bits < 0 then return false end
  for k = 1, #a do
    if bits <= 0 then return true end
    if bits >= 8 then
      if pa[k] ~= a[k] then return false end
    else
      local m = 2 ^ (8 - bits)
      if math.floor(pa[k] / m) ~= math.floor(a[k] / m) then return false end
    end
    bits = bits - 8
  end
  return true
end

local function trusted_addr(a, trusted)
  for _, p in ipairs(trusted) do
    if contains(p, a) then return true end
  end
  return false
end

-- first returns the first of a header's values, or nil.
local function first(v)
  if type(v) == "table" then return v[1] end
  return v
end

-- client_addr is httplimit's clientAddr: peer is the TCP peer's
-- address, and fields(name) the lines of a request header (a string, a
-- list or nil), read only when the peer is a trusted proxy. It returns the
-- client's address in canonical form, or nil and why the request has none.
function _M.client_addr(peer, fields, trusted)
  local client = _M.parse_addr(peer or "")
  if not client then return nil, "the remote address is not an IP address" end
  if #trusted == 0 or not trusted_addr(client, trusted) then return _M.addr_string(client) end
  local xff, real = fields("x-forwarded-for"), first(fields("x-real-ip"))
  if type(xff) == "string" then xff = { xff } end
  local r = client
  if real and _M.trim_space(real) ~= "" then
    r = _M.parse_addr(_M.trim_space(real))
    if not r then return nil, "X-Real-IP from a trusted proxy is not an IP address" end
  end
  if not xff or #xff == 0 then return _M.addr_string(r) end
  if r ~= client then
    local l = _M.parse_addr(_M.trim_space(xff[#xff]:match("([^,]*)$")))
    if not l or _M.addr_string(l) ~= _M.addr_string(r) then
      return nil, "a trusted proxy sent X-Real-IP and an X-Forwarded-For that ends elsewhere"
    end
  end
  for i = #xff, 1, -1 do
    local entries = {}
    for e in (xff[i] .. ","):gmatch("([^,]*),") do entries[#entries + 1] = e end
    for j = #entries, 1, -1 do
      local e = _M.trim_space(entries[j])
      if e ~= "" then
        local a = _M.parse_addr(e)
        if not a then return nil, "an X-Forwarded-For entry from a trusted proxy is not an IP address" end
        client = a
        if not trusted_addr(a, trusted) then return _M.addr_string(a) end
      end
    end
  end
  return _M.addr_string(client)
end

-- TOKEN holds the bytes of an RFC 9110 token (header and cookie names).
local TOKEN = {}
for b = 0, 255 do
  local c = char(b)
  TOKEN[b] = (c:match("[%w]") ~= nil or ("!#$%&'*+-.^_`|~"):find(c, 1, true) ~= nil) and b < 128
end

local function valid_token(s)
  if s == "" then return false end
  for i = 1, #s do
    if not TOKEN[byte(s, i)] then return false end
  end
  return true
end

local WANT = "want client-address, header:NAME, query:NAME or cookie:NAME"

-- parse_part is config.ParseKeyPart: {kind, name}, or nil and an error.
function _M.parse_part(s)
  if s == "client-address" then return { kind = "client-address" } end
  if type(s) ~= "string" then return nil, format("key source %s is not a string (%s)", tostring(s), WANT) end
  local colon = find(s, ":", 1, true)
  if not colon then return nil, format("unknown key source %q (%s)", s, WANT) end
  local kind, name = sub(s, 1, colon - 1), sub(s, colon + 1)
  if kind == "header" or kind == "cookie" then
    if not valid_token(name) then
      return nil, format("key source %q: %q is not a valid %s name", s, name, kind)
    end
    if kind == "header" then name = name:lower() end
  elseif kind == "query" then
    if name == "" then return nil, format("key source %q: missing the query argument's name", s) end
  else
    return nil, format("unknown key source %q (%s)", s, WANT)
  end
  return { kind = kind, name = name }
end

-- escape_part is httplimit's writeEscaped: "|" and "\" escaped with "\".
local function escape_part(s)
  if not find(s, "[|\\]") then return s end
  return (s:gsub("[|\\]", "\\%0"))
end

-- part_key returns a part's key from a request r (a table of functions:
-- args, the raw query; header(name), a lower-case header's lines; peer,
-- the TCP peer's address), or nil and why there is none.
local function part_key(p, r, trusted)
  local kind = p.kind
  if kind == "query" then
    local v = _M.query_value(r.args() or "", p.name)
    if v == "" then return nil, format("no query argument %q", p.name) end
    return v
  elseif kind == "header" then
    local v = first(r.header(p.name))
    v = v and _M.trim_space(v)
    if not v or v == "" then return nil, format("no %s header", p.name) end
    return v
  elseif kind == "cookie" then
    local lines = r.header("cookie")
    if type(lines) == "string" then lines = { lines } end
    local v = lines and _M.cookie_value(lines, p.name)
    if not v or v == "" then return nil, format("no cookie %q", p.name) end
    return v
  end
  return _M.client_addr(r.peer(), r.header, trusted)
end

-- source compiles a key source: from, a part or a list of parts joined
-- (Combine), or first_of, a list of parts of which the first present
-- counts, prefixed "<index>:" (FirstOf), with trusted the proxies whose
-- forwarding fields client-address believes (a list of addresses and CIDR
-- prefixes; default none). It returns a function of a request table
-- (part_key's r) returning the key, or nil and
-- why there is none; or nil and an error for a bad source.
function _M.source(from, first_of, trusted)
  if (from == nil) == (first_of == nil) then
    return nil, "set either from (combine every part) or first_of (the first part present), not both"
  end
  local list = from or first_of
  if type(list) ~= "table" then list = { list } end
  if #list == 0 then return nil, "no key source" end
  local parts = {}
  for i, s in ipairs(list) do
    local p, err = _M.parse_part(s)
    if not p then return nil, err end
    parts[i] = p
  end
  local prefixes, err = _M.parse_trusted(trusted or {})
  if not prefixes then return nil, err end
  if #parts == 1 and from then
    local p = parts[1]
    return function(r) return part_key(p, r, prefixes) end
  end
  if from then
    return function(r)
      local out = {}
      for i, p in ipairs(parts) do
        local k, why = part_key(p, r, prefixes)
        if not k then return nil, why end
        out[i] = escape_part(k)
      end
      return concat(out, "|")
    end
  end
  return function(r)
    local whys = {}
    for i, p in ipairs(parts) do
      local k, why = part_key(p, r, prefixes)
      if k then return (i - 1) .. ":" .. k end
      whys[i] = why
    end
    return nil, concat(whys, "; ")
  end
end

-- NGX is the request table of the running nginx request (part_key's
-- r): the headers are read once per key, when a part needs them (key
-- resets them; nothing in between yields).
local headers
_M.NGX = {
  args = function() return ngx.var.args end,
  header = function(name)
    headers = headers or ngx.req.get_headers(0)
    return rawget(headers, name)
  end,
  peer = function() return ngx.var.remote_addr end,
}

-- key returns the key of the running nginx request under src (a
-- function source made), or nil and why there is none.
function _M.key(src)
  headers = nil
  local k, why = src(_M.NGX)
  headers = nil
  return k, why
end

return _M
