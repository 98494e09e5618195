package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts. Each touches the keys of one lock (one hash tag, so one
// Cluster slot) and runs atomically in one round trip. go-redis runs them
// with EVALSHA and falls back to EVAL when the server answers NOSCRIPT (a
// restarted server has an empty script cache).

// acquireScript takes the lock if it is free and it is the caller's turn,
// and returns {1, fence}; else {0, holder's remaining ttl in ms (0 when the
// lock is free but reserved for an earlier waiter)}.
//
// Turns: a caller that means to wait (ARGV[5] = "1") is queued under its
// waiter id (one per driver instance: the component sends one attempt per
// name at a time) in arrival order; while live waiters are queued, a free
// lock goes to the first of them only, so a holder releasing and acquiring
// again does not overtake the others. A waiter is live while it retried
// within the last ARGV[6] ms; dead ones are dropped when they reach the
// head. Without queued waiters the script is a plain SET NX.
//
// Fences: when the counter is missing (new name, expired counter, or a
// server restarted without persistence) it is seeded from the server's
// clock in microseconds, so fences keep growing as long as a name is
// acquired less than once per microsecond on average.
//
//	KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue (zset), KEYS[4] queue liveness (hash)
//	ARGV[1] token, ARGV[2] ttl (ms), ARGV[3] counter ttl (ms),
//	ARGV[4] waiter id, ARGV[5] "1" to queue when not acquired, ARGV[6] waiter liveness (ms)
var acquireScript = goredis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local live = tonumber(ARGV[6])
local free = redis.call('EXISTS', KEYS[1]) == 0
local queued = redis.call('EXISTS', KEYS[3]) == 1
local ms
local turn = true
if free and queued then
  ms = now()
  while true do
    local h = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not h then break end
    if tonumber(redis.call('HGET', KEYS[4], h) or '0') >= ms - live then
      turn = h == ARGV[4]
      break
    end
    redis.call('ZREM', KEYS[3], h)
    redis.call('HDEL', KEYS[4], h)
  end
end
if free and turn then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  if queued then
    redis.call('ZREM', KEYS[3], ARGV[4])
    redis.call('HDEL', KEYS[4], ARGV[4])
  end
  if redis.call('EXISTS', KEYS[2]) == 0 then
    local t = redis.call('TIME')
    redis.call('SET', KEYS[2], t[1] .. string.format('%06d', tonumber(t[2])))
  end
  local f = redis.call('INCR', KEYS[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return {1, f}
end
if ARGV[5] == '1' then
  ms = ms or now()
  redis.call('ZADD', KEYS[3], 'NX', ms, ARGV[4])
  redis.call('HSET', KEYS[4], ARGV[4], ms)
  redis.call('PEXPIRE', KEYS[3], live)
  redis.call('PEXPIRE', KEYS[4], live)
end
if free then return {0, 0} end
return {0, redis.call('PTTL', KEYS[1])}
`)

// releaseScript deletes the lock if token holds it and publishes the key
// on the release channel. Returns 1 if it did, else 0.
//
//	KEYS[1] lock
//	ARGV[1] token, ARGV[2] channel, ARGV[3] the component's key
var releaseScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
`)

// extendScript sets the lock's ttl if token holds it. Returns 1 or 0.
//
//	KEYS[1] lock
//	ARGV[1] token, ARGV[2] ttl (ms)
var extendScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// renewScript extends many locks of one slot. Returns one 1 or 0 per key.
//
//	KEYS[i] lock i
//	ARGV[2i-1] token i, ARGV[2i] ttl i (ms)
var renewScript = goredis.NewScript(`
local r = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[2*i-1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2*i])
    r[i] = 1
  else
    r[i] = 0
  end
end
return r
`)

// inspectScript returns {token, fence, remaining ttl ms} of a held lock, or
// nil when it is free.
//
//	KEYS[1] lock, KEYS[2] fence counter
var inspectScript = goredis.NewScript(`
local t = redis.call('GET', KEYS[1])
if not t then return false end
return {t, redis.call('GET', KEYS[2]) or '0', redis.call('PTTL', KEYS[1])}
`)
