-- reset.lua: forgets the state of some hits.
--
-- KEYS: the state keys to delete (one hash slot in a Cluster).
-- ARGV: none.
-- Reply: an array of one integer, the number of keys deleted. O(keys).

return {redis.call('DEL', unpack(KEYS))}
