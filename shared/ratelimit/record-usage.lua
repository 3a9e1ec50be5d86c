-- Adds the units a call used (tokens) to the current one-second bucket of each layer, on the
-- Redis server's clock like the check itself. KEYS: the layers' hashes; ARGV[1]: units; ARGV[2]: window.
local now = redis.call('TIME')[1]
for _, key in ipairs(KEYS) do
  redis.call('HINCRBY', key, now, tonumber(ARGV[1]))
  redis.call('EXPIRE', key, tonumber(ARGV[2]) + 1)
end
return 1
