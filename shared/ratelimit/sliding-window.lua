-- Checks every layer of one request and, only if all have room, counts the request in each.
-- Each layer is a hash of one-second buckets (field = unix second, value = units used), so the
-- window is exactly the last WINDOW seconds and a burst can never pass more than the limit.
-- Time comes from the Redis server, so every API replica agrees on it.
--
-- Beside its buckets a hash keeps `sum`, the total of the buckets it holds, and `from`, a second
-- no bucket is older than. A check then drops only the buckets that left the window since the
-- last one (usually none or one) and reads the total, rather than reading all sixty buckets of
-- every layer: at a thousand calls a second that was most of this script's cost.
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
local froms = {}

-- Drops the buckets that left the window. Returns the units still in it and the hash's `from`
-- (nil when the hash does not exist).
local function live_units(key)
  local state = redis.call('HMGET', key, 'sum', 'from')
  local sum = tonumber(state[1]) or 0
  local from = tonumber(state[2])
  if from ~= nil and from >= oldest then return sum, from end
  local expired = {}
  if from == nil then
    -- No `from`: a new hash, or one written before hashes kept their total. Total its buckets once.
    local fields = redis.call('HGETALL', key)
    if #fields == 0 then return 0, nil end
    for f = 1, #fields, 2 do
      local second = tonumber(fields[f])
      if second and second < oldest then expired[#expired + 1] = fields[f] elseif second then sum = sum + tonumber(fields[f + 1]) end
    end
    -- A hash left with no buckets goes whole: written again it would lose its expiry.
    if #expired * 2 == #fields then
      redis.call('DEL', key)
      return 0, nil
    end
  else
    -- Every write renews the hash's expiry (WINDOW + 1 s), so it holds at most that many seconds
    -- of buckets older than the window.
    local seconds = {}
    for second = math.max(from, oldest - window - 1), oldest - 1 do seconds[#seconds + 1] = second end
    local counts = redis.call('HMGET', key, unpack(seconds))
    for k = 1, #seconds do
      if counts[k] then
        sum = sum - tonumber(counts[k])
        expired[#expired + 1] = seconds[k]
      end
    end
  end
  if #expired > 0 then redis.call('HDEL', key, unpack(expired)) end
  redis.call('HSET', key, 'sum', sum, 'from', oldest)
  return sum, oldest
end

-- Counts units in this second's bucket, keeping `sum` and `from` true (`from` as live_units read it).
local function add(key, units, from)
  redis.call('HINCRBY', key, now, units)
  redis.call('HINCRBY', key, 'sum', units)
  -- A new hash, or a server clock that stepped back: no bucket may be older than `from`.
  if from == nil or now < from then redis.call('HSET', key, 'from', now) end
  redis.call('EXPIRE', key, window + 1)
end

-- Seconds until enough of the oldest buckets leave the window to make room for `needed` units
-- (only for a refusal, so reading every bucket here costs nothing on the way that passes).
local function retry_after(key, needed)
  local fields = redis.call('HGETALL', key)
  local live = {}
  for f = 1, #fields, 2 do
    local second = tonumber(fields[f])
    if fields[f] ~= 'sum' and fields[f] ~= 'from' and second >= oldest then live[#live + 1] = { second, tonumber(fields[f + 1]) } end
  end
  table.sort(live, function(a, b) return a[1] < b[1] end)
  local freed = 0
  for _, bucket in ipairs(live) do
    freed = freed + bucket[2]
    if freed >= needed then
      local retry = bucket[1] + window - now
      if retry < 1 then return 1 end
      return retry
    end
  end
  return window
end

for j = layers + 1, #KEYS do
  local _, from = live_units(KEYS[j])
  add(KEYS[j], tonumber(ARGV[2 + layers + j]), from)
end

for i = 1, layers do
  local key = KEYS[i]
  local limit = tonumber(ARGV[1 + 2 * i])
  local cost = tonumber(ARGV[2 + 2 * i])
  local total, from = live_units(key)
  used[i] = total
  froms[i] = from
  local full = (cost > 0 and total + cost > limit) or (cost == 0 and total >= limit)
  if full then
    return { 0, i, retry_after(key, total + math.max(cost, 1) - limit) }
  end
end

local result = { 1, 0, 0 }
for i = 1, layers do
  local key = KEYS[i]
  local limit = tonumber(ARGV[1 + 2 * i])
  local cost = tonumber(ARGV[2 + 2 * i])
  if cost > 0 then add(key, cost, froms[i]) end
  result[#result + 1] = limit - used[i] - cost
end
return result
