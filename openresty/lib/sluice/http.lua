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

-- field_ids returns each hit's identifier in the fields: its label, made
-- unique among the shown (non-shadow) hits (httpfields.FieldIDs).
function _M.field_ids(c)
  local ids, hits = {}, c.hits
  local function shown(i) return not c.shadow and not hits[i].limit.shadow end
  local shared = false
  for i, h in ipairs(hits) do
    ids[i] = limits.label(h.limit)
    for j = 1, i - 1 do
      shared = shared or (shown(i) and shown(j) and ids[j] == ids[i])
    end
  end
  if not shared then return ids end
  local qualified = {}
  for i = 1, #ids do
    for j = 1, #ids do
      if i ~= j and shown(i) and shown(j) and limits.label(hits[i].limit) == limits.label(hits[j].limit) then
        qualified[i] = (hits[i].zone or "") ~= ""
      end
    end
  end
  for i = 1, #ids do
    if qualified[i] then ids[i] = hits[i].zone .. "/" .. ids[i] end
  end
  for i = 1, #ids do
    local j = 1
    while j < i and shown(i) do
      if shown(j) and ids[j] == ids[i] then
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
local function json_string(s)
  s = s:gsub('[\\"]', "\\%0"):gsub("[%z\1-\31<>&]", function(ch) return format("\\u%04x", byte(ch)) end)
  return '"' .. s .. '"'
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
  local text = concat(body)
  ngx.status = status
  local h = ngx.header
  h["Content-Type"] = "application/problem+json"
  h["Cache-Control"] = "no-store"
  h["Content-Length"] = #text
  h["X-Content-Type-Options"] = "nosniff"
  ngx.print(text)
  return ngx.exit(status)
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

return _M
