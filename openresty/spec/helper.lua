-- The unit tests run on the Lua 5.x that Debian's busted uses, not on
-- nginx's LuaJIT: this helper gives them the two LuaJIT modules the pure
-- parts load, and nothing of ngx.
--
--   bit: LuaJIT's BitOp, from Lua 5.2's bit32 (the CRC-16 of the hash
--     slot keeps every value within 16 bits, where the two agree).
--   ffi: only what sluice.keys declares, SHA256 from libcrypto, computed
--     by sha256sum(1) on a temporary file.
if not package.preload.bit and bit32 then
  package.preload.bit = function() return bit32 end
end

local function sha256(s)
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
  local p = assert(io.popen("sha256sum " .. path))
  local hex = p:read("*l"):match("^(%x+)")
  p:close()
  os.remove(path)
  return hex
end

package.preload.ffi = function()
  return {
    cdef = function() end,
    new = function() return {} end,
    C = {
      SHA256 = function(s, n, md)
        local hex = sha256(s:sub(1, n))
        for i = 0, 31 do md[i] = tonumber(hex:sub(2 * i + 1, 2 * i + 2), 16) end
        return md
      end,
    },
  }
end
