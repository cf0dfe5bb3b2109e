-- sluice.http: the HTTP answer of a decision, as sluice serve writes it
-- (internal/httpfields): RateLimit-Policy and RateLimit (IETF draft),
-- Retry-After, and an RFC 9457 quota-exceeded problem on a denial.
local limits = require "sluice.limits"

local format, concat, ceil, max, min, byte = string.format, table.concat, math.ceil, math.max, math.min, string.byte

local _M = {}

local MAX_SF_INTEGER = 999999999999999

-- ceil_seconds is a duration in µs in whole seconds, rounded up.
local function ceil_seconds(us)
  if us <= 0 then return 0 end
  return ceil(us / 1e6)
end

-- sf_string quotes s as a Structured Field String: '"' and '\' escaped,
-- bytes outside 0x20-0x7E as '?'.
local function sf_string(s)
  return '"' .. s:gsub('[\\"]', "\\%0"):gsub("[%z\1-\31\127-\255]", "?") .. '"'
end

local function param(name, v)
  return format("%s%.0f", name, min(max(v, 0), MAX_SF_INTEGER))
end

-- shown reports whether hit i of c appears in the fields (not shadow).
local function shown_hit(c, i) return not c.shadow and not c.hits[i].limit.shadow end

-- field_ids returns each hit's identifier in the fields: its label, made
-- unique among the shown (non-shadow) hits (httpfields.FieldIDs).
function _M.field_ids(c)
  local ids, hits = {}, c.hits
  local shown = shown_hit
  local shared = false
  for i, h in ipairs(hits) do
    ids[i] = limits.label(h.limit)
    for j = 1, i - 1 do
      shared = shared or (shown(c, i) and shown(c, j) and ids[j] == ids[i])
    end
  end
  if not shared then return ids end
  local qualified = {}
  for i = 1, #ids do
    for j = 1, #ids do
      if i ~= j and shown(c, i) and shown(c, j) and limits.label(hits[i].limit) == limits.label(hits[j].limit) then
        qualified[i] = (hits[i].zone or "") ~= ""
      end
    end
  end
  for i = 1, #ids do
    if qualified[i] then ids[i] = hits[i].zone .. "/" .. ids[i] end
  end
  for i = 1, #ids do
    local j = 1
    while j < i and shown(c, i) do
      if shown(c, j) and ids[j] == ids[i] then
        ids[i] = ids[i] .. "#" .. i
        j = 1
      else
        j = j + 1
      end
    end
  end
  return ids
end

-- policy is the RateLimit-Policy field, or nil.
function _M.policy(c, ids)
  local items = {}
  for i, h in ipairs(c.hits) do
    if not c.shadow and not h.limit.shadow then
      items[#items + 1] = sf_string(ids[i]) .. param(";q=", h.limit.rate) .. param(";w=", ceil_seconds(h.limit.window))
    end
  end
  if #items == 0 then return nil end
  return concat(items, ", ")
end

-- ratelimit is the RateLimit field, or nil.
function _M.ratelimit(c, d, ids)
  if #d.hits ~= #c.hits then return nil end
  local items = {}
  for i, h in ipairs(c.hits) do
    if not c.shadow and not h.limit.shadow then
      local r = d.hits[i]
      local wait = r.allowed and r.reset_after or r.retry_after
      items[#items + 1] = sf_string(ids[i]) .. param(";r=", r.remaining) .. param(";t=", ceil_seconds(wait))
    end
  end
  if #items == 0 then return nil end
  return concat(items, ", ")
end

-- retry_after_seconds is a denial's Retry-After: at least 1.
function _M.retry_after_seconds(d)
  return max(1, ceil_seconds(d.retry_after))
end

-- set_fields sets the fields of c and d on the response.
function _M.set_fields(c, d)
  local ids = _M.field_ids(c)
  local h = ngx.header
  h["RateLimit-Policy"] = _M.policy(c, ids)
  h["RateLimit"] = _M.ratelimit(c, d, ids)
  if not d.allowed then h["Retry-After"] = _M.retry_after_seconds(d) end
  return ids
end

-- json_string is s as a JSON string, as encoding/json writes it.
local function json_escape(ch) return format("\\u%04x", byte(ch)) end

local function json_string(s)
  s = s:gsub('[\\"]', "\\%0"):gsub("[%z\1-\31<>&]", json_escape)
  return '"' .. s .. '"'
end

-- send_problem ends the request with status and a problem+json body
-- (text), the headers every problem answer carries.
local function send_problem(status, text)
  ngx.status = status
  local h = ngx.header
  h["Content-Type"] = "application/problem+json"
  h["Cache-Control"] = "no-store"
  h["Content-Length"] = #text
  h["X-Content-Type-Options"] = "nosniff"
  ngx.print(text)
  return ngx.exit(status)
end

-- problem writes an RFC 9457 problem as the response and ends it.
function _M.problem(status, title, detail, typ, violated)
  local body = { '{"type":', json_string(typ or "about:blank"), ',"title":', json_string(title),
    ',"status":', tostring(status) }
  if detail and detail ~= "" then body[#body + 1] = ',"detail":' .. json_string(detail) end
  if violated and #violated > 0 then
    local v = {}
    for i, s in ipairs(violated) do v[i] = json_string(s) end
    body[#body + 1] = ',"violated-policies":[' .. concat(v, ",") .. "]"
  end
  body[#body + 1] = "}\n"
  return send_problem(status, concat(body))
end

-- deny answers a denied check (httpfields.WriteDenied).
function _M.deny(status, c, d)
  local ids = _M.set_fields(c, d)
  local violated = {}
  for i, h in ipairs(c.hits) do
    local r = d.hits[i]
    if r and not r.allowed and not r.shadow and not c.shadow and not h.limit.shadow then
      violated[#violated + 1] = ids[i]
    end
  end
  local detail = "the rate limit is exceeded; retry after " .. _M.retry_after_seconds(d) .. " s"
  if d.source == "fail-closed" then
    detail = "the rate limiter is unavailable and denies requests until it is back; retry after 1 s"
  end
  return _M.problem(status, "Quota exceeded", detail,
    "https://iana.org/assignments/http-problem-types#quota-exceeded", violated)
end

-- Sites: access with a spec string derives the fields' parts its checks
-- share once (sluice.lua's site_of), and each answer only adds the numbers.

-- prepare fills site (n hits) with what the fields of the checks like c
-- share: RateLimit-Policy, and each shown hit's identifier quoted for the
-- RateLimit field (qids) and for the problem (jids).
function _M.prepare(site, c)
  local ids = _M.field_ids(c)
  site.ids, site.policy, site.qids, site.jids = ids, _M.policy(c, ids), {}, {}
  for i = 1, #c.hits do
    if shown_hit(c, i) then site.qids[i], site.jids[i] = sf_string(ids[i]), json_string(ids[i]) end
  end
end

-- site_ratelimit is the RateLimit field of d, a decision of site, or nil.
-- The numbers are integers far below 1e14, which .. prints exactly.
local function site_ratelimit(site, d)
  local hits = d.hits
  if #hits ~= site.n then return nil end
  if site.n == 1 then -- no loop: the common case stays one compiled trace
    local q, r = site.qids[1], hits[1]
    if not q then return nil end
    local rem, t = min(r.remaining, MAX_SF_INTEGER),
        min(ceil_seconds(r.allowed and r.reset_after or r.retry_after), MAX_SF_INTEGER)
    -- The site's last field, when it says the same: most answers of a
    -- site do (new keys, r = limit - 1), and a string not made is one
    -- the string table is not probed for.
    if rem == site.rl_r and t == site.rl_t then return site.rl end
    local v = q .. ";r=" .. rem .. ";t=" .. t
    site.rl, site.rl_r, site.rl_t = v, rem, t
    return v
  end
  local out
  for i = 1, site.n do
    local q = site.qids[i]
    if q then
      local r = hits[i]
      local item = q .. ";r=" .. min(r.remaining, MAX_SF_INTEGER) .. ";t=" ..
          min(ceil_seconds(r.allowed and r.reset_after or r.retry_after), MAX_SF_INTEGER)
      out = out and (out .. ", " .. item) or item
    end
  end
  return out
end

-- set_site_fields sets the RateLimit fields of d, a decision of site.
function _M.set_site_fields(site, d)
  local h = ngx.header
  if site.policy then h["RateLimit-Policy"] = site.policy end
  local rl = site_ratelimit(site, d)
  if rl then h["RateLimit"] = rl end
end

local QUOTA_TYPE = '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded","status":'
local CLOSED_DETAIL = "the rate limiter is unavailable and denies requests until it is back; retry after 1 s"

-- deny_site answers d, a denial of site, as deny does.
function _M.deny_site(status, site, d)
  _M.set_site_fields(site, d)
  local h = ngx.header
  local secs = _M.retry_after_seconds(d)
  h["Retry-After"] = secs
  local violated
  local hits = d.hits
  for i = 1, site.n do
    local r, j = hits[i], site.jids[i]
    if j and r and not r.allowed and not r.shadow then violated = violated and (violated .. "," .. j) or j end
  end
  local detail = d.source == "fail-closed" and CLOSED_DETAIL or ("the rate limit is exceeded; retry after " .. secs .. " s")
  local body = QUOTA_TYPE .. status .. ',"detail":"' .. detail .. '"' ..
      (violated and (',"violated-policies":[' .. violated .. "]}\n") or "}\n")
  return send_problem(status, body)
end

-- deny_memo answers a denial of site (one limit) from e, an entry of the
-- deny cache's memo (edge.memo_get), whose hit waits retry µs now: the
-- same fields and body as deny_site, the strings made once per whole
-- second of the wait and kept in e.
function _M.deny_memo(status, site, e, retry)
  local t = ceil_seconds(retry)
  if e.t ~= t or e.status ~= status then
    local secs = max(1, ceil_seconds(retry < 1 and 1 or retry))
    e.t, e.status = t, status
    e.ratelimit = site.qids[1] .. ";r=" .. min(e.remaining, MAX_SF_INTEGER) .. ";t=" .. min(t, MAX_SF_INTEGER)
    e.secs = tostring(secs)
    e.body = QUOTA_TYPE .. status .. ',"detail":"the rate limit is exceeded; retry after ' .. secs ..
        ' s","violated-policies":[' .. site.jids[1] .. "]}\n"
    e.len = tostring(#e.body)
  end
  local h = ngx.header
  h["RateLimit-Policy"] = site.policy
  h["RateLimit"] = e.ratelimit
  h["Retry-After"] = e.secs
  ngx.status = status
  h["Content-Type"] = "application/problem+json"
  h["Cache-Control"] = "no-store"
  h["Content-Length"] = e.len
  h["X-Content-Type-Options"] = "nosniff"
  ngx.print(e.body)
  return ngx.exit(status)
end

return _M
