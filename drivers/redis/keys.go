package redis

import "strings"

// Redis keys. A lock key K (the component's prefix and the lock name) is
// stored as "{E}" and its fence counter as "{E}:fence", where E is K with
// '%', '{' and '}' percent-encoded ("%25", "%7B", "%7D") and the empty key
// encoded as "%". E never contains a brace and is never empty, so it is the
// whole hash tag of both keys: a lock and its counter always share a Cluster
// slot, whatever the name. The encoding is injective, so distinct names get
// distinct keys, and a lock key (ending in '}') never equals a counter key
// (ending in ":fence").

// escaper percent-encodes the characters that would break the hash tag.
var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// tag returns the hash-tagged base key of a lock key.
func tag(key string) string {
	if key == "" {
		return "{%}"
	}
	return "{" + escaper.Replace(key) + "}"
}

// lockKey is the Redis key holding the lock's token.
func lockKey(key string) string { return tag(key) }

// Suffixes of a lock's other keys, appended to its tag.
const (
	fenceSuffix = ":fence"
	queueSuffix = ":queue"
	liveSuffix  = ":live"
)

// tagKeys returns the Redis keys of the lock whose tag is t: the lock,
// its fence counter, its queue and the queue's hash. The last three share
// one allocation (substrings of one string): a script's keys are built on
// every call.
func tagKeys(t string) (lock, fence, queue, live string) {
	all := t + fenceSuffix + t + queueSuffix + t + liveSuffix
	f := len(t) + len(fenceSuffix)
	q := f + len(t) + len(queueSuffix)
	return t, all[:f], all[f:q], all[q:]
}

// fenceKey is the Redis key of the lock's fence counter.
func fenceKey(key string) string { return tag(key) + fenceSuffix }

// slot is the Redis Cluster hash slot of a Redis key (CRC16/XMODEM of its
// hash tag, modulo 16384).
func slot(redisKey string) int {
	k := redisKey
	if s := strings.IndexByte(k, '{'); s >= 0 {
		if e := strings.IndexByte(k[s+1:], '}'); e > 0 {
			k = k[s+1 : s+1+e]
		}
	}
	return int(crc16(k) % 16384)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), as Redis
// Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// queueKey is the Redis key of the lock's waiter queue (a sorted set of
// waiter ids by arrival time).
func queueKey(key string) string { return tag(key) + queueSuffix }

// liveKey is the Redis key of the queue's liveness hash (waiter id → the
// server time of its last attempt, in ms).
func liveKey(key string) string { return tag(key) + liveSuffix }
