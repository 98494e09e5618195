package redis

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts. Each touches the keys of one lock (one hash tag, so one
// Cluster slot) and runs atomically in one round trip. go-redis runs them
// with EVALSHA and falls back to EVAL when the server answers NOSCRIPT (a
// restarted server has an empty script cache).

// Out of memory: a server over maxmemory (noeviction) refuses a command
// that may grow memory (SET, INCR, HSET, ZADD) in a script that has not
// written yet, and allows it after any write. A script that passes a lock
// on therefore writes something that frees memory first (DEL, ZREM), so
// that a full server still lets a holder give its lock up, to a waiter or
// a successor, instead of failing and leaving it held until its ttl.
//
// Server time: beside the commands, a number passed to redis.call costs
// the server a printf (%.17g) and a tonumber of a string a strtod, each
// about as much as a cheap command; the scripts pass the ARGV strings and
// string literals as they are, format a computed value once when it is
// stored twice, and read each key once (`go test -run '^$' -bench Scripts
// ./drivers/redis` reports the server's µs per script).
//
// queueLua defines the functions of the queue-aware scripts. Scripts run
// their common, uncontended path first and define these only when they
// need them (defining them costs the server time on every call); the
// acquire script defines epochLua's only in its branch that runs an epoch.
//
// Turns: a caller that means to wait is queued under its waiter id (one
// per driver instance: the component sends one attempt per name at a time)
// in arrival order, in a sorted set (id → arrival ms, made unique so that
// waiters arriving within one ms keep their order) beside a hash with,
// per id, the server ms of its last attempt (field id), the token and ttl
// of its current attempt (fields "t:"..id, "x:"..id). A waiter is live
// while it retried within the last `live` ms; head drops dead ones when
// they reach the front. Scripts write after reading TIME, which needs
// effects replication (the default since Redis 5).
//
// Fences: INCR of the counter; a result of 1 means the counter was missing
// (new name, expired counter, or a server restarted without persistence):
// seed then sets it from the server's clock in microseconds, so fences keep
// growing as long as a name is acquired less than once per microsecond on
// average. When TIME is refused (an ACL user without it), seed deletes the
// counter again and fails the call: a counter left at 1 would hand out
// fences below those given before.
//
// Pub/Sub is best effort inside the scripts (pcall): a user refused PUBSUB
// or PUBLISH (Redis 7's default ACL channel rules refuse every channel)
// still releases and passes locks on; the waiters then learn of it by
// their polls instead of a message.
//
// pass is given a lock its holder gives up while waiters are queued (h,
// the first of them, already read: the caller checked the queue with that
// one call instead of EXISTS). Waiters at the front that stopped retrying
// are dropped; when none is left the lock is deleted. Otherwise the lock
// goes to the first live waiter, told on its driver's own channel so that
// only that process wakes (its liveness, token and ttl come in one HMGET):
//
//   - hand-off, when that waiter's driver is subscribed on this node and
//     the waiter registered its current attempt (token, ttl): the lock is
//     set for that token here (after the waiter leaves the queue, so the
//     SET is not the first write; no DEL of the old holder's value), with
//     the waiter's ttl and the next fence, and the message
//     "g<fence>,<token length>,<token><key>" tells it that it holds the
//     lock, so it needs no round trip of its own. A waiter whose wait
//     ended first unregistered its token (leaveScript; one whose call
//     ended for good also left the queue), and a crashed process has no
//     subscription, so neither is handed a lock.
//   - else the lock is deleted and the message "w<key>" wakes it to retry.
//
// While an epoch's wait runs (wk exists: the server may have forgotten a
// grant, see epoch.go) nothing is handed over: the lock is deleted and the
// first waiter woken, to meet the wait in its acquire script. A holder
// releasing there may hold a copy the server kept from before a
// replication cut, after the lock went to another holder on the old master.
const queueLua = `
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function seed(key, ttl, floor)
  local t = redis.pcall('TIME')
  if t.err then
    redis.call('DEL', key)
    error(t)
  end
  local v = t[1] .. string.format('%06d', tonumber(t[2]))
  if tonumber(v) <= floor then v = string.format('%d', floor) end
  redis.call('SET', key, v)
  local f = redis.call('INCR', key)
  redis.call('PEXPIRE', key, ttl)
  return f
end
local function fence(key, ttl, floor)
  local f = redis.call('INCR', key)
  if f == 1 or f <= floor then return seed(key, ttl, floor) end
  redis.call('PEXPIRE', key, ttl)
  return f
end
local function forget(queue, seen, h)
  redis.call('ZREM', queue, h)
  redis.call('HDEL', seen, h, 't:' .. h, 'x:' .. h)
end
local function head(queue, seen, ms, live)
  while true do
    local h = redis.call('ZRANGE', queue, '0', '0')[1]
    if not h then return nil end
    if tonumber(redis.call('HGET', seen, h) or '0') >= ms - live then return h end
    forget(queue, seen, h)
  end
end
local function pass(lock, fkey, queue, seen, prefix, key, live, fttl, h, ek, wk)
  local mark = redis.call('MGET', wk, ek)
  if mark[1] then
    redis.call('DEL', lock)
    redis.pcall('PUBLISH', prefix .. h, 'w' .. key)
    return
  end
  local ms = now()
  local w
  while true do
    w = redis.call('HMGET', seen, h, 't:' .. h, 'x:' .. h)
    if tonumber(w[1] or '0') >= ms - live then break end
    forget(queue, seen, h)
    h = redis.call('ZRANGE', queue, '0', '0')[1]
    if not h then
      redis.call('DEL', lock)
      return
    end
  end
  local ch = prefix .. h
  local tok, ttl = w[2], w[3]
  local subs = redis.pcall('PUBSUB', 'NUMSUB', ch)
  if tok and ttl and not subs.err and subs[2] > 0 then
    forget(queue, seen, h)
    redis.call('SET', lock, tok, 'PX', ttl)
    if tonumber(ttl) > tonumber(fttl) then fttl = ttl end
    local f = fence(fkey, fttl, tonumber(mark[2]) or 0)
    redis.pcall('PUBLISH', ch, string.format('g%d,%d,', f, #tok) .. tok .. key)
  else
    redis.call('DEL', lock)
    redis.pcall('PUBLISH', ch, 'w' .. key)
  end
end
`

// acquireScript takes the lock if it is free and it is the caller's turn,
// and returns {1, fence} (on the common path, the fence alone: a bare
// integer costs the server and the client less than an array); else {0,
// holder's remaining ttl in ms (0 when the lock is free but reserved for
// an earlier waiter)}. A lock already held by the caller's token was
// handed to it by a release, or taken by an earlier run of the same call
// (go-redis retrying after a lost reply): {1, its fence}.
//
// Without a queue (the common case) it is SET NX PX, INCR and PEXPIRE of
// the counter. While live waiters are queued, a free lock goes to the
// first of them only, so a holder releasing and acquiring again does not
// overtake the others. A caller that means to wait (ARGV[5] = "1") and did
// not get the lock is queued (or proves itself alive) with its token and
// ttl.
//
// Nothing is granted while the epoch marker is missing or its wait runs
// (see epoch.go): then {0, the wait left in ms}. The marker's value is the
// fence floor: a counter at or below it (an older copy, on a replica
// promoted in a fail-over) is raised above it first.
//
//	KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue (zset), KEYS[4] queue hash,
//	KEYS[5] epoch marker, KEYS[6] its wait key
//	ARGV[1] token, ARGV[2] ttl (ms), ARGV[3] counter ttl (ms),
//	ARGV[4] waiter id, ARGV[5] "1" to queue when not acquired, ARGV[6] waiter liveness (ms),
//	ARGV[7] restart wait (ms)
var acquireScript = goredis.NewScript(`
local mark = redis.call('MGET', KEYS[5], KEYS[6])
local ready = mark[1] and not mark[2]
local seeding, empty = false, false
if ready and redis.call('EXISTS', KEYS[3]) == 0 then
  empty = true
  if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local f = redis.call('INCR', KEYS[2])
    if f > math.max(tonumber(mark[1]) or 0, 1) then
      redis.call('PEXPIRE', KEYS[2], ARGV[3])
      return f
    end
    seeding = true
  elseif ARGV[5] ~= '1' then
    if redis.call('GET', KEYS[1]) == ARGV[1] then
      return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
    end
    return {0, redis.call('PTTL', KEYS[1])}
  end
end
` + queueLua + `
if not ready then
` + epochLua + `
  local left = epoch(KEYS[5], KEYS[6], tonumber(ARGV[7]), false)
  if left > 0 then return {0, left} end
  mark[1] = redis.call('GET', KEYS[5])
end
if seeding then
  redis.call('DEL', KEYS[2])
  return {1, fence(KEYS[2], ARGV[3], tonumber(mark[1]) or 0)}
end
local id = ARGV[4]
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  forget(KEYS[3], KEYS[4], id)
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
local ms
if not v then
  ms = now()
  local h = head(KEYS[3], KEYS[4], ms, tonumber(ARGV[6]))
  if h == nil or h == id then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    forget(KEYS[3], KEYS[4], id)
    return {1, fence(KEYS[2], ARGV[3], tonumber(mark[1]) or 0)}
  end
end
if ARGV[5] == '1' then
  ms = ms or now()
  local at = string.format('%d', ms)
  if empty then
    redis.call('ZADD', KEYS[3], at, id)
  elseif not redis.call('ZSCORE', KEYS[3], id) then
    local after = tonumber(redis.call('ZRANGE', KEYS[3], '-1', '-1', 'WITHSCORES')[2] or '0') + 1
    redis.call('ZADD', KEYS[3], after > ms and after or at, id)
  end
  redis.call('HSET', KEYS[4], id, at, 't:' .. id, ARGV[1], 'x:' .. id, ARGV[2])
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
  redis.call('PEXPIRE', KEYS[4], ARGV[6])
end
if not v then return {0, 0} end
return {0, redis.call('PTTL', KEYS[1])}
`)

// releaseScript deletes the lock if token holds it and returns 1, else 0.
// An uncontended release does nothing more (GET, EXISTS of the queue,
// DEL: EXISTS costs the server less than reading the queue's first member);
// when waiters are queued, the lock is passed on (see queueLua).
//
//	KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] queue hash, KEYS[5] epoch marker,
//	KEYS[6] its wait key
//	ARGV[1] token, ARGV[2] channel prefix (the waiter id is appended),
//	ARGV[3] the component's key, ARGV[4] waiter liveness (ms), ARGV[5] counter ttl (ms)
var releaseScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
local first = redis.call('ZRANGE', KEYS[3], '0', '0')[1]
` + queueLua + passLua + `
return 1
`)

// handoverScript passes the lock from token ARGV[1] to token ARGV[6] for
// ARGV[7] ms, with the next fence, when nobody queues for it, and returns
// {2, fence}; with waiters queued it releases the lock as releaseScript
// does (passing it on) and returns {1, 0}. {0, 0}: token did not hold it.
// A lock already held by the new token was handed to it by an earlier run
// of the same call (go-redis retrying after a lost reply): {2, its fence},
// as acquireScript answers a retry, so that the caller tracks that lock.
//
//	KEYS and ARGV[1..5] as releaseScript
//	ARGV[6] new token, ARGV[7] its ttl (ms)
var handoverScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[6] then return {2, tonumber(redis.call('GET', KEYS[2]) or '0')} end
if cur ~= ARGV[1] then return {0, 0} end
local fttl = ARGV[5]
if tonumber(ARGV[7]) > tonumber(fttl) then fttl = ARGV[7] end
local floor
local first = redis.call('ZRANGE', KEYS[3], '0', '0')[1]
if not first then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[1], ARGV[6], 'PX', ARGV[7])
  local f = redis.call('INCR', KEYS[2])
  floor = tonumber(redis.call('GET', KEYS[5]) or '0') or 0
  if f > math.max(floor, 1) then
    redis.call('PEXPIRE', KEYS[2], fttl)
    return {2, f}
  end
end
` + queueLua + `
if floor then
  redis.call('DEL', KEYS[2])
  return {2, fence(KEYS[2], fttl, floor)}
end
` + passLua + `
return {1, 0}
`)

// passLua passes on a lock its holder gives up, with waiters queued
// (releaseScript, handoverScript, leaveScript: each defines first, the
// queue's first member).
const passLua = `
pass(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], first, KEYS[5], KEYS[6])`

// leaveScript ends a waiting attempt that got no lock in time. It first
// unregisters the attempt's token, so that no later release hands it the
// lock. A call whose wait ran out (ARGV[7] = "0") keeps its place in the
// queue for its next attempt (its component usually asks again at once);
// a call that ended for good (ARGV[7] = "1": its context ended or the store
// failed) leaves the queue, so that the next waiter is first at once (and
// pass below does not pick it). Both only while the token is still the
// one registered: a later attempt of the same driver for the same key,
// registered meanwhile under the same waiter id, keeps its place.
// Then, if a release handed it the lock meanwhile, it returns {1, fence}:
// the caller holds it; or, with ARGV[7] = "1", it releases that lock at
// once, passing it on as releaseScript does, and returns {0, 0}. Else
// {0, 0}.
//
//	KEYS and ARGV[1..5] as releaseScript
//	ARGV[6] waiter id, ARGV[7] "1" when the call ended: release a lock
//	handed over, and leave the queue
var leaveScript = goredis.NewScript(`
local id = ARGV[6]
if redis.call('HGET', KEYS[4], 't:' .. id) == ARGV[1] then
  if ARGV[7] == '1' then
    redis.call('HDEL', KEYS[4], 't:' .. id, 'x:' .. id, id)
    redis.call('ZREM', KEYS[3], id)
  else
    redis.call('HDEL', KEYS[4], 't:' .. id, 'x:' .. id)
  end
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, 0} end
if ARGV[7] ~= '1' then return {1, tonumber(redis.call('GET', KEYS[2]) or '0')} end
local first = redis.call('ZRANGE', KEYS[3], '0', '0')[1]
if not first then
  redis.call('DEL', KEYS[1])
  return {0, 0}
end
` + queueLua + passLua + `
return {0, 0}
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
