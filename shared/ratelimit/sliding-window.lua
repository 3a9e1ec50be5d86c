-- Checks every layer of one request and, only if all have room, counts the request in each.
-- Each layer is a hash of one-second buckets (field = unix second, value = units used), so the
-- window is exactly the last WINDOW seconds and a burst can never pass more than the limit.
-- Time comes from the Redis server, so every API replica agrees on it.
--
-- First it adds the units of earlier calls that were not yet counted (tokens, known once those
-- calls finished) to the current bucket of their hashes: they ride on this round trip instead of
-- costing one of their own, and this check already sees them.
--
-- KEYS[1..n]         the layers' hashes (n = ARGV[2]; 0 = only record usage)
-- KEYS[n+1..]        hashes of token layers to add usage to
-- ARGV[1]            window in seconds
-- ARGV[2]            n
-- ARGV[2+2i-1]       limit of layer i
-- ARGV[2+2i]         cost of layer i (units to add; 0 = only check that the layer is not already full)
-- ARGV[2+2n+j]       units to add to usage hash j
-- Returns { allowed (1|0), failing layer (1-based, 0 if none), retry_after_seconds, remaining... }
local window = tonumber(ARGV[1])
local layers = tonumber(ARGV[2])
local now = tonumber(redis.call('TIME')[1])
local oldest = now - window + 1
local used = {}
local buckets = {}

for j = layers + 1, #KEYS do
  redis.call('HINCRBY', KEYS[j], now, tonumber(ARGV[2 + layers + j]))
  redis.call('EXPIRE', KEYS[j], window + 1)
end

for i = 1, layers do
  local key = KEYS[i]
  local limit = tonumber(ARGV[1 + 2 * i])
  local cost = tonumber(ARGV[2 + 2 * i])
  local fields = redis.call('HGETALL', key)
  local total = 0
  local live = {}
  local expired = {}
  for f = 1, #fields, 2 do
    local second = tonumber(fields[f])
    local count = tonumber(fields[f + 1])
    if second < oldest then
      expired[#expired + 1] = fields[f]
    else
      total = total + count
      live[#live + 1] = { second, count }
    end
  end
  if #expired > 0 then redis.call('HDEL', key, unpack(expired)) end
  used[i] = total
  buckets[i] = live

  local full = (cost > 0 and total + cost > limit) or (cost == 0 and total >= limit)
  if full then
    -- Wait until enough of the oldest buckets leave the window to make room.
    table.sort(live, function(a, b) return a[1] < b[1] end)
    local needed = total + math.max(cost, 1) - limit
    local freed = 0
    local retry = window
    for _, bucket in ipairs(live) do
      freed = freed + bucket[2]
      if freed >= needed then
        retry = bucket[1] + window - now
        break
      end
    end
    if retry < 1 then retry = 1 end
    return { 0, i, retry }
  end
end

local result = { 1, 0, 0 }
for i = 1, layers do
  local key = KEYS[i]
  local limit = tonumber(ARGV[1 + 2 * i])
  local cost = tonumber(ARGV[2 + 2 * i])
  if cost > 0 then
    redis.call('HINCRBY', key, now, cost)
    redis.call('EXPIRE', key, window + 1)
  end
  result[#result + 1] = limit - used[i] - cost
end
return result
