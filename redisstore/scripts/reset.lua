-- reset.lua: forgets the state of some hits.
--
-- KEYS: the state keys to delete (one hash slot in a Cluster).
-- ARGV: none.
-- Reply: an array with one string, the number of keys deleted. O(keys).

return {string.format('%d', redis.call('DEL', unpack(KEYS)))}
