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
