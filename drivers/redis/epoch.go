package redis

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Epochs. A store that may have forgotten locks (restarted without
// persistence, flushed, brand new, or a replica promoted in a fail-over)
// must not grant a lock that an earlier holder may still believe it holds.
// Every server (standalone, Sentinel master; in a Cluster every hash slot)
// keeps an epoch marker: a key that never expires, whose value is the
// fence floor, the server's clock in µs when the epoch began. While its
// wait key exists (the time the epoch began, in ms, with a ttl of the wait
// left) nothing is granted. The acquire script reads both keys with one
// MGET on its common path; a missing marker starts a new epoch (see
// epochLua), and so does the driver when a new connection finds another
// server process (run_id) than before (see detect.go).

// epochKey is the marker of a standalone or Sentinel server. Lock keys
// always begin with '{', so no lock name can reach it.
const epochKey = "mutexfx:epoch"

// waitSuffix is appended to a marker for its wait key.
const waitSuffix = ":wait"

// slotMarks are the marker keys of every Cluster hash slot, built once:
// "{<tag>}:epoch" with a tag that hashes to that slot. No lock key ends in
// ":epoch" or ":epoch:wait".
var slotMarks = sync.OnceValue(func() *[16384][2]string {
	var m [16384][2]string
	left := len(m)
	for i := 0; left > 0; i++ {
		tag := "mutexfx:" + strconv.Itoa(i)
		s := int(crc16(tag) % 16384)
		if m[s][0] != "" {
			continue
		}
		e := "{" + tag + "}:epoch"
		m[s] = [2]string{e, e + waitSuffix}
		left--
	}
	return &m
})

// marks returns the epoch marker and wait key for a lock's Redis key.
func (d *Driver) marks(redisKey string) (string, string) {
	if !d.cluster {
		return epochKey, epochKey + waitSuffix
	}
	m := &slotMarks()[slot(redisKey)]
	return m[0], m[1]
}

// ttlSeen is the longest ttl the driver was asked for, in ms.
type ttlSeen struct{ ms atomic.Int64 }

// see records ttl and returns it in whole ms.
func (s *ttlSeen) see(ttl time.Duration) int64 {
	ms := ttlMillis(ttl)
	for {
		cur := s.ms.Load()
		if cur >= ms || s.ms.CompareAndSwap(cur, ms) {
			return ms
		}
	}
}

// restartWait is how long, in ms, nothing is granted after a store may have
// forgotten locks: RestartWait when set, else the longest ttl the driver
// was asked for (at least ms, the current call's).
func (d *Driver) restartWait(ms int64) int64 {
	if d.set.restartWait > 0 {
		return max(ttlMillis(d.set.restartWait), ms)
	}
	return max(d.longest.ms.Load(), ms)
}

// epochLua defines epoch(ek, wk, wait, force), which returns the ms left
// before the server may grant locks (0: it may now). With the marker ek
// present (and force false) that is the wait key's ttl, raised to the
// caller's wait counted from the epoch's start (a driver with a longer
// ttl lengthens it). Else (and with force: the driver found a new server
// process) it starts an epoch: ek = the server's clock in µs (the fence
// floor), and wk, for the wait, the start in ms with a ttl of the wait. A
// missing marker on a server that has been up longer than the wait, was
// never flushed (FLUSHALL, FLUSHDB in INFO commandstats) and is no promoted
// replica (master_replid2) means a brand-new store: no wait; else the
// server may have granted locks before it forgot them, and the wait is
// counted from its start (restart) or from now. A forced epoch never
// shortens a wait that runs: another driver, which knows a longer ttl,
// may have started it (a driver not asked for a ttl yet knows none). The uptime counts whole
// seconds of the server's clock and may be up to 1 s ahead: 1 s of it is
// not counted. A user refused INFO waits the whole wait.
const epochLua = `
local function info(section)
  local r = redis.pcall('INFO', section)
  if type(r) ~= 'string' then return '' end
  return r
end
local function epoch(ek, wk, wait, force)
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if not force and redis.call('EXISTS', ek) == 1 then
    local start = tonumber(redis.call('GET', wk) or '')
    if not start then return 0 end
    local left = start + wait - ms
    local pttl = redis.call('PTTL', wk)
    if left > pttl then
      redis.call('PEXPIRE', wk, left)
      return left
    end
    return math.max(pttl, 0)
  end
  local left = wait
  if not force then
    local up = tonumber(string.match(info('server'), 'uptime_in_seconds:(%d+)') or '')
    local cs = info('commandstats')
    local id2 = string.match(info('replication'), 'master_replid2:(%x+)')
    if up and id2 and not string.find(id2, '[^0]') and not string.find(cs, 'cmdstat_flushall:', 1, true) and
        not string.find(cs, 'cmdstat_flushdb:', 1, true) then
      left = wait - math.max(up - 1, 0) * 1000
    end
  end
  redis.call('SET', ek, t[1] .. string.format('%06d', tonumber(t[2])))
  if force then
    local pttl = redis.call('PTTL', wk)
    if pttl >= left then return math.max(pttl, 0) end
  end
  if left > 0 then
    redis.call('SET', wk, ms - (wait - left), 'PX', left)
    return left
  end
  redis.call('DEL', wk)
  return 0
end
`

// epochSrc starts a new epoch on the server that runs it (see
// epochLua), for a driver that found a new server process, and returns the
// wait in ms.
//
//	KEYS[1] epoch marker, KEYS[2] its wait key
//	ARGV[1] restart wait (ms)
const epochSrc = epochLua + `
return epoch(KEYS[1], KEYS[2], tonumber(ARGV[1]), true)
`
