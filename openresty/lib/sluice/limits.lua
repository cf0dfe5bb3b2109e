-- sluice.limits: limits as sluice.Limit has them, in microseconds, parsed
-- and validated as sluice.ParseLimits and Limit.Validate do, and checks
-- validated as sluice.Check.Validate does. Errors start with
-- "sluice: invalid input:" (the text of sluice.ErrInvalid).
local floor, format = math.floor, string.format

local _M = {}

_M.MAX_HITS = 16
_M.MAX_KEY_LEN = 65536
_M.MAX_RATE = 1000000000
_M.MAX_LOG_RATE = 10000
_M.MAX_WINDOW = 36500 * 86400 * 1000000 -- µs
_M.MAX_BUCKETS = 1000
_M.DEFAULT_BUCKETS = 10

local INVALID = "sluice: invalid input: "
_M.INVALID = INVALID
-- BAD_STATE starts the error of a check that failed on what one of its
-- keys holds in Redis (data that is not sluice's under the prefix):
-- sluice.ErrBadState. Redis answered; the check fails alone.
_M.BAD_STATE = "sluice: bad stored state: "

-- CODE is each algorithm's one-letter code in the scripts' ARGV.
local CODE = { ["sliding-window"] = "w", buckets = "b", log = "l", decay = "d", gcra = "g" }
_M.CODE = CODE

local SECOND, MINUTE, HOUR, DAY = 1000000, 60000000, 3600000000, 86400000000
local UNIT_PERIODS = { s = SECOND, m = MINUTE, h = HOUR, d = DAY }
-- DURATION_UNITS are Go's time.ParseDuration units, in µs.
local DURATION_UNITS = { ns = 0.001, us = 1, ["µs"] = 1, ["μs"] = 1, ms = 1000, s = SECOND, m = MINUTE, h = HOUR }

local function trim(s)
  return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

-- parse_duration parses a Go duration such as 30s, 1h30m or 1.5h into µs
-- (fractions of a µs kept, for Validate to refuse).
local function parse_duration(p)
  local total, rest = 0, p
  if rest == "" then return nil end
  while rest ~= "" do
    local num, unit, tail = rest:match("^([%d]*%.?[%d]*)([^%d%.]+)(.*)$")
    if not num or num == "" or num == "." then return nil end
    local mult
    for u, m in pairs(DURATION_UNITS) do
      if unit:sub(1, #u) == u and (not mult or #u > #mult[1]) then mult = { u, m } end
    end
    if not mult then return nil end
    tail = unit:sub(#mult[1] + 1) .. tail
    total = total + tonumber(num) * mult[2]
    rest = tail
  end
  return total
end

local function parse_period(p)
  if UNIT_PERIODS[p] then return UNIT_PERIODS[p] end
  if p == "" then return nil, 'missing period after "r/"' end
  if not p:match("^%d") then
    return nil, format("period %q must be s, m, h, d or a count with a unit such as 30s", p)
  end
  local days = p:match("^(%d+)d$")
  if days then
    local n = tonumber(days)
    if n <= 0 or n > 36500 then return nil, format("period %q: days must be a positive integer", p) end
    return n * DAY
  end
  local d = parse_duration(p)
  if not d then return nil, format("period %q is not a duration such as 30s, 15m or 1h30m", p) end
  if d <= 0 then return nil, format("period %q must be > 0", p) end
  return d
end

-- format_period is sluice's formatPeriod: s, m, h, d, whole days as Nd,
-- else Go's Duration.String without a trailing "0s" after minutes.
local function format_period(w)
  if w == SECOND then return "s" elseif w == MINUTE then return "m"
  elseif w == HOUR then return "h" elseif w == DAY then return "d" end
  if w > 0 and w % DAY == 0 then return format("%.0f", w / DAY) .. "d" end
  local function frac(v, unit) -- v / unit with the fraction's zeros trimmed
    local i = floor(v / unit)
    local f = v - i * unit
    local s = format("%.0f", i)
    if f > 0 then
      local digits = #format("%.0f", unit) - 1
      s = s .. "." .. (format("%0" .. digits .. ".0f", f):gsub("0+$", ""))
    end
    return s
  end
  if w < 1000 then return format("%.0fµs", w) end
  if w < SECOND then return frac(w, 1000) .. "ms" end
  local h = floor(w / HOUR)
  local m = floor((w - h * HOUR) / MINUTE)
  local s = frac(w - h * HOUR - m * MINUTE, SECOND) .. "s"
  local out
  if h > 0 then out = format("%.0fh%.0fm", h, m) .. s
  elseif m > 0 then out = format("%.0fm", m) .. s
  else out = s end
  if out:sub(-3) == "m0s" then out = out:sub(1, -3) end
  return out
end

-- spec returns the limit's spec string, such as "10r/m" (Limit.String).
function _M.spec(l)
  return format("%.0f", l.rate) .. "r/" .. format_period(l.window)
end

-- label returns the limit's name, or its spec string (Limit.Label).
function _M.label(l)
  if l.name and l.name ~= "" then return l.name end
  -- Kept on the limit: parsed limits are reused for every request.
  local key = l.rate .. "/" .. l.window
  if l.label_of ~= key then l.label, l.label_of = _M.spec(l), key end
  return l.label
end

-- new returns a limit from a table {rate, window (µs, or a period such as
-- "1m"), algorithm, resolution (µs), shadow, name}, validated, with its
-- code and bucket (µs) filled in.
function _M.new(t)
  local l = {
    rate = t.rate, window = t.window, algorithm = t.algorithm or "sliding-window",
    resolution = t.resolution or 0, shadow = t.shadow and true or false, name = t.name,
  }
  if l.algorithm == "" then l.algorithm = "sliding-window" end
  if type(l.window) == "string" then
    local w, err = parse_period(l.window)
    if not w then return nil, INVALID .. err end
    l.window = w
  end
  local err = _M.validate(l)
  if err then return nil, err end
  return l
end

-- problem returns why l cannot be used, without the "limit ...:" prefix,
-- or nil; it fills l.code and l.bucket. (A plain function, no closure:
-- validate runs for every check, and LuaJIT does not compile the creation
-- of one.)
local function problem(l)
  local rate, w = l.rate, l.window
  if type(rate) ~= "number" or rate <= 0 or rate ~= floor(rate) then return "rate must be a positive integer" end
  if rate > _M.MAX_RATE then return format("rate must be <= %d (sluice.MaxRate)", _M.MAX_RATE) end
  if type(w) ~= "number" or w <= 0 then return "window must be > 0" end
  if w > _M.MAX_WINDOW then return "window must be <= 36500 days (sluice.MaxWindow)" end
  if w ~= floor(w) then return "window must be a whole number of microseconds" end
  local code = CODE[l.algorithm]
  if not code then return format("unknown algorithm %q", tostring(l.algorithm)) end
  if code == "l" and rate > _M.MAX_LOG_RATE then
    return format("a log limit's rate must be <= %d (use an estimating algorithm for higher rates)", _M.MAX_LOG_RATE)
  end
  l.code, l.bucket = code, w
  if code ~= "b" then return nil end
  local r = l.resolution or 0
  if r == 0 then r = floor(w * 1000 / _M.DEFAULT_BUCKETS) / 1000 end -- Window/10 in ns, then µs
  if r < 0 then return "resolution must be >= 0" end
  if r < 1 or r ~= floor(r) then return "resolution must be a whole number of microseconds" end
  if w % r ~= 0 then return "resolution does not divide the window" end
  if w / r > _M.MAX_BUCKETS then return format("resolution makes %d buckets per window, more than %d", w / r, _M.MAX_BUCKETS) end
  l.bucket = r
  return nil
end

-- validate returns nil when l can be used, else the error (Limit.Validate),
-- which names the limit once: sluice: invalid input: limit "10r/s": why.
-- It fills l.code and l.bucket.
function _M.validate(l)
  local why = problem(l)
  if not why then return nil end
  local spec = type(l.rate) == "number" and type(l.window) == "number" and _M.spec(l) or "?"
  return INVALID .. format("limit %q: %s", spec, why)
end

-- parse_limit parses one spec string, "<rate>r/<period>" (sluice.ParseLimit).
function _M.parse_limit(s)
  local spec = trim(s)
  local function bad(why)
    return nil, INVALID .. format("limit %q: %s (want <rate>r/<period>, such as 100r/s, 10r/m or 20r/30s)", s, why)
  end
  local rate_text, period = spec:match("^(.-)r/(.*)$")
  if not rate_text then return bad('missing "r/"') end
  if not rate_text:match("^%d+$") then return bad(format("rate %q is not a positive integer", rate_text)) end
  local rate = tonumber(rate_text)
  if rate == 0 then return bad("rate must be > 0") end
  local w, err = parse_period(period)
  if not w then return bad(err) end
  local l = { rate = rate, window = w, algorithm = "sliding-window", resolution = 0, shadow = false }
  local why = problem(l)
  if why then return bad(why) end
  return l
end

-- parse_limits parses a comma-separated list such as "1r/5s, 5r/h"
-- (sluice.ParseLimits).
function _M.parse_limits(s)
  local out, i = {}, 0
  for part in (s .. ","):gmatch("([^,]*),") do
    i = i + 1
    if trim(part) == "" then
      return nil, INVALID .. format('limits %q: element %d is empty (want comma-separated limits such as "1r/5s, 5r/h")', s, i)
    end
    local l, err = _M.parse_limit(part)
    if not l then return nil, err end
    out[i] = l
  end
  return out
end

local function same_state(a, b)
  return a.zone == b.zone and a.key == b.key and a.limit.code == b.limit.code and
      a.limit.window == b.limit.window and a.limit.bucket == b.limit.bucket
end

-- validate_check returns nil when c is well formed (sluice.Check.Validate):
-- c.hits = { {zone, key, limit}, ... }, c.cost an integer >= 0.
function _M.validate_check(c)
  local hits, cost = c.hits, c.cost
  if type(hits) ~= "table" or #hits == 0 then return INVALID .. "check has no hits" end
  if #hits > _M.MAX_HITS then return INVALID .. format("check has %d hits, more than %d", #hits, _M.MAX_HITS) end
  if type(cost) ~= "number" or cost < 0 or cost ~= floor(cost) then
    return INVALID .. "cost must be an integer >= 0"
  end
  for i, h in ipairs(hits) do
    h.zone = h.zone or ""
    if type(h.key) ~= "string" or h.key == "" then return INVALID .. format("hit %d: empty key", i - 1) end
    if #h.key > _M.MAX_KEY_LEN then
      return INVALID .. format("hit %d: key of %d bytes is longer than %d", i - 1, #h.key, _M.MAX_KEY_LEN)
    end
    if type(h.limit) ~= "table" then return INVALID .. format("hit %d: no limit", i - 1) end
    local err = _M.validate(h.limit)
    if err then return err end
    if cost > h.limit.rate then
      return INVALID .. format("hit %d: cost %d is greater than the rate of limit %q and could never pass", i - 1, cost, _M.spec(h.limit))
    end
    for j = 1, i - 1 do
      if same_state(hits[j], h) then return INVALID .. format("hits %d and %d share state", j - 1, i - 1) end
    end
  end
  return nil
end

return _M
