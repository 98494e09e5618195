package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts. Each touches the keys of one lock (one hash tag, so one
// Cluster slot) and runs atomically in one round trip. go-redis runs them
// with EVALSHA and falls back to EVAL when the server answers NOSCRIPT (a
// restarted server has an empty script cache).

// acquireScript takes the lock if it is free and returns {1, fence}, else
// {0, holder's remaining ttl in ms}. When the fence counter is missing (new
// name, expired counter, or a server restarted without persistence) it is
// seeded from the server's clock in microseconds, so fences keep growing as
// long as a name is acquired less than once per microsecond on average.
//
//	KEYS[1] lock, KEYS[2] fence counter
//	ARGV[1] token, ARGV[2] ttl (ms), ARGV[3] counter ttl (ms)
var acquireScript = goredis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    local t = redis.call('TIME')
    redis.call('SET', KEYS[2], t[1] .. string.format('%06d', tonumber(t[2])))
  end
  local f = redis.call('INCR', KEYS[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return {1, f}
end
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
