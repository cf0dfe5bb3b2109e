-- sluice.keys: the Redis key of a hit's state and its Cluster hash slot,
-- byte for byte as redisstore builds them (redisstore/keys.go):
--
--   <prefix><zone>{<tag>}:<ALGO><window µs>[/<bucket µs>][:<key>]
--
-- The tag is the hit's key, or the check's group when set (then the key
-- follows the identity). Every user-supplied part goes through
-- encode_part, which leaves no "{", "}" or ":" in it, so the tag Redis
-- Cluster hashes is exactly the encoded tag, and parts longer than 128
-- bytes once escaped become "%H" and their SHA-256: a 64 KB key makes a
-- key of the same bounded length as a short one.
local bit = require "bit"
local ffi = require "ffi"

local band, bxor, lshift, rshift = bit.band, bit.bxor, bit.lshift, bit.rshift
local byte, format, gsub, find = string.byte, string.format, string.gsub, string.find

local _M = {}

-- MAX_PART is the longest encoded part kept as is (redisstore's maxPart).
_M.MAX_PART = 128

-- KEY_CODE is each algorithm's code in keys (redisstore's keyCode).
_M.KEY_CODE = { w = "W", b = "B", l = "L", d = "D", g = "G" }

ffi.cdef [[
unsigned char *SHA256(const unsigned char *d, size_t n, unsigned char *md);
]]
local digest = ffi.new("unsigned char[32]")

-- sha256_hex returns the lower-case hex SHA-256 of s, with the libcrypto
-- nginx is linked with.
local function sha256_hex(s)
  ffi.C.SHA256(s, #s, digest)
  local out = {}
  for i = 0, 31 do out[i + 1] = format("%02x", digest[i]) end
  return table.concat(out)
end
_M.sha256_hex = sha256_hex

-- ESCAPED matches the bytes encode_part escapes: controls and space,
-- DEL and every byte >= 0x80, "{", "}", ":" and "%".
local ESCAPED = "[%z\1-\32\127-\255{}:%%]"

local function escape_byte(c)
  return format("%%%02X", byte(c))
end

-- encode_part is redisstore's encodePart: an injective escape into
-- printable ASCII without "{", "}" or ":", or "%H" and the hex SHA-256 of
-- s when the escape is longer than MAX_PART bytes.
-- clean reports whether s has no byte encode_part escapes: a loop LuaJIT
-- compiles, where find with a pattern is not.
local function clean(s)
  for i = 1, #s do
    local b = byte(s, i)
    if b <= 32 or b >= 127 or b == 123 or b == 125 or b == 58 or b == 37 then return false end
  end
  return true
end

function _M.encode_part(s)
  if #s <= _M.MAX_PART and clean(s) then return s end
  if not find(s, ESCAPED) then
    if #s <= _M.MAX_PART then return s end
    return "%H" .. sha256_hex(s)
  end
  local _, n = gsub(s, ESCAPED, "")
  if #s + 2 * n > _M.MAX_PART then
    return "%H" .. sha256_hex(s)
  end
  return (gsub(s, ESCAPED, escape_byte))
end

-- itoa prints an integer-valued number (below 2^53) exactly.
local function itoa(n)
  return format("%.0f", n)
end
_M.itoa = itoa

-- limit_suffix returns "}:<ALGO><window µs>[/<bucket µs>]" for limit,
-- kept on it while its algorithm, window and bucket stay.
local function limit_suffix(limit)
  local s = limit.key_suffix
  if s and limit.ks_code == limit.code and limit.ks_window == limit.window and limit.ks_bucket == limit.bucket then
    return s
  end
  local num = itoa(limit.window)
  if limit.code == "b" then num = num .. "/" .. itoa(limit.bucket) end
  s = "}:" .. _M.KEY_CODE[limit.code] .. num
  limit.key_suffix, limit.ks_code, limit.ks_window, limit.ks_bucket = s, limit.code, limit.window, limit.bucket
  return s
end

-- state_key returns the key of a hit's state and its tag. limit is a
-- parsed limit (sluice.limits): code, window and bucket in µs.
function _M.state_key(prefix, zone, key, group, limit)
  local enc = _M.encode_part
  local tag, suffix
  if group and group ~= "" then
    tag, suffix = enc(group), ":" .. enc(key)
  else
    tag, suffix = enc(key), ""
  end
  return prefix .. enc(zone) .. "{" .. tag .. limit_suffix(limit) .. suffix, tag
end

-- CRC is the table of CRC-16/XMODEM (polynomial 0x1021).
local CRC = {}
for i = 0, 255 do
  local crc = lshift(i, 8)
  for _ = 1, 8 do
    if band(crc, 0x8000) ~= 0 then
      crc = bxor(lshift(crc, 1), 0x1021)
    else
      crc = lshift(crc, 1)
    end
    crc = band(crc, 0xffff)
  end
  CRC[i] = crc
end

-- slot returns the Redis Cluster hash slot of a key whose hash tag is tag:
-- CRC16 (XMODEM) of the tag, mod 16384.
function _M.slot(tag)
  local crc = 0
  for i = 1, #tag do
    crc = band(bxor(lshift(crc, 8), CRC[bxor(rshift(crc, 8), byte(tag, i))]), 0xffff)
  end
  return crc % 16384
end

return _M
