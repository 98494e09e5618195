package mysql

import (
	"fmt"
	"time"
)

// Fair hand-off in table mode. Other processes' waiters poll: unhelped, a
// process that releases and asks again retakes the row before their next
// poll, and pollers are served in random order. So each row holds a FIFO
// queue of waiting drivers: a failed attempt appends its driver (once per
// wait), a free row goes only to the first live entry (anyone if none),
// and the taker leaves the queue in the same statement. An entry lives
// while its driver asked within WaiterLiveness: a waiter asks again
// WaiterLiveness/2 after its last stamp, an attempt restamps an entry
// older than 3/8 of it (a write is a commit), and attempts prune up to
// pruneDepth dead head entries. Entries are fixed-width: the driver's
// 16-byte random id, then its last attempt, 13 digits of ms since
// 2000-01-01 (database clock, UTC).
//
// The acquire statement's first assignment puts the outcome, from the row
// as it was, in LAST_INSERT_ID (read from the OK packet); the later ones
// read it back. The outcome, a BIGINT:
//
//	bits 0-49    taken: the new fence; not taken: the holder's remaining µs
//	             (WaiterLiveness when the row is free but others come first)
//	bit 54       not taken: refresh this driver's entry
//	bit 55       not taken: append this driver to the queue
//	bits 56-57   how many dead entries at the head to prune
//	bit 62       not taken (heldMark)
const (
	entryWidth = 16 + 13 // driver id, last attempt (ms, 13 digits)
	maxQueue   = 256     // entries; a driver finding the queue full waits unqueued
	pruneDepth = 3       // dead head entries pruned per statement (at most 3: two bits)
	valueMask  = 1<<50 - 1
	refreshBit = 1 << 54
	appendBit  = 1 << 55
	leadShift  = 56
)

// nowMS is the database's time in milliseconds since 2000-01-01 (UTC).
const nowMS = `(TIMESTAMPDIFF(MICROSECOND, '2000-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`

// nextFence is a row's next fence: one above its last, and at least the
// database's clock in units of 4 µs since 1970 (under 2^50 until 2112).
// A row is taken under its lock at most once per commit, far less often
// than once per 4 µs, so a fence is the clock when it was taken (or one
// above a fence taken in the same instant). A fence given after a crash
// forgot commits (innodb_flush_log_at_trx_commit 0 or 2), or after a
// restore from a backup, is so above every fence given before, unless the
// server's clock went back. UTC_TIMESTAMP is the statement's start: each
// use in one statement is the same value.
const (
	fenceClock = epochMicros + ` DIV 4`
	nextFence  = `GREATEST(fence + 1, ` + fenceClock + `)`
)

// tableAcquireSQL inserts the row or takes over an expired one, honouring
// the queue. Parameters: name_hash, token, ttl µs, name, driver id; %[1]s
// table, %[2]s outcome, %[3]s new queue, %[4]d heldMark, %[5]s floor table
// (a new row's fence is one above it, or the clock: table_schema.go).
const tableAcquireSQL = `INSERT INTO %[1]s (name_hash, token, fence, expires_at, name, taken_by)
VALUES (?, ?, LAST_INSERT_ID(GREATEST(COALESCE((SELECT fence FROM %[5]s WHERE id = 1 LOCK IN SHARE MODE), 0) + 1,
 ` + fenceClock + `)),
 UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?, ?)
ON DUPLICATE KEY UPDATE
 fence = IF(LAST_INSERT_ID(%[2]s) < %[4]d, ` + nextFence + `, fence),
 token = IF(LAST_INSERT_ID() < %[4]d, VALUES(token), token),
 name = IF(LAST_INSERT_ID() < %[4]d, VALUES(name), name),
 queue = %[3]s,
 taken_by = IF(LAST_INSERT_ID() < %[4]d, VALUES(taken_by), taken_by),
 expires_at = IF(LAST_INSERT_ID() < %[4]d, VALUES(expires_at), expires_at)`

// queueSQL makes SQL on queue column q for driver id me, liveness l ms.
type queueSQL struct {
	q, me string
	l     int64
}

// dead: entry k exists, is not me and is older than l (fixed-width
// stamps compare as strings).
func (s queueSQL) dead(k int) string {
	return fmt.Sprintf("(LENGTH(%[1]s) >= %[2]d AND SUBSTRING(%[1]s, %[3]d, 16) <> %[4]s AND SUBSTRING(%[1]s, %[5]d, 13) < %[6]s)",
		s.q, (k+1)*entryWidth, k*entryWidth+1, s.me, k*entryWidth+17, stampSQL(s.l))
}

// lead is the number of dead entries at the head, up to pruneDepth.
func (s queueSQL) lead() string { return s.leadFrom(0) }

func (s queueSQL) leadFrom(k int) string {
	if k == pruneDepth {
		return fmt.Sprint(pruneDepth)
	}
	return fmt.Sprintf("IF(%s, %s, %d)", s.dead(k), s.leadFrom(k+1), k)
}

// stampSQL is the entry stamp of ago ms before now.
func stampSQL(ago int64) string {
	return fmt.Sprintf("LPAD(%s - %d, 13, '0')", nowMS, ago)
}

// before is the number of entries before me (all of them if I am not queued).
func (s queueSQL) before() string {
	return fmt.Sprintf("IF(INSTR(%[1]s, %[2]s) > 0, (INSTR(%[1]s, %[2]s) - 1) DIV %[3]d, LENGTH(%[1]s) DIV %[3]d)", s.q, s.me, entryWidth)
}

// outcome is the acquire statement's outcome (see above).
func (s queueSQL) outcome() string {
	if s.l == 0 {
		return fmt.Sprintf("IF(expires_at < UTC_TIMESTAMP(6), %s, %d + GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), 1))", nextFence, heldMark)
	}
	free := "expires_at < UTC_TIMESTAMP(6)"
	may := fmt.Sprintf("(%s AND %s <= %s)", free, s.before(), s.lead())
	mine := fmt.Sprintf("INSTR(%s, %s)", s.q, s.me)
	// not queued: append, unless the queue is full, or empty while my driver
	// holds the row (its own waiters queue in the component)
	app := fmt.Sprintf("(%[1]s = 0 AND LENGTH(%[2]s) < %[3]d AND NOT (%[2]s = '' AND NOT %[4]s AND taken_by = %[5]s))",
		mine, s.q, maxQueue*entryWidth, free, s.me)
	refresh := fmt.Sprintf("(%[1]s > 0 AND SUBSTRING(%[2]s, %[1]s + 16, 13) < %[3]s)", mine, s.q, stampSQL(s.l*3/8))
	return fmt.Sprintf(`IF(%[1]s, %[11]s, %[2]d + IF(%[3]s, %[4]d,
   GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), 1)) + IF(%[5]s, %[6]d, 0) + IF(%[7]s, %[8]d, 0))
  + (%[9]s << %[10]d)`,
		may, heldMark, free, s.l*1000, app, appendBit, refresh, refreshBit, s.lead(), leadShift, nextFence)
}

// newQueue is the queue after the outcome in LAST_INSERT_ID(): the dead
// head pruned, then me removed (taken), appended or refreshed.
func (s queueSQL) newQueue() string {
	if s.l == 0 {
		return s.q
	}
	base := fmt.Sprintf("SUBSTRING(%s, ((LAST_INSERT_ID() >> %d) & 3) * %d + 1)", s.q, leadShift, entryWidth)
	at := fmt.Sprintf("INSTR(%s, %s)", base, s.me)
	stamp := stampSQL(0)
	return fmt.Sprintf(`IF(LAST_INSERT_ID() < %[1]d, IF(%[2]s > 0, CONCAT(LEFT(%[3]s, %[2]s - 1), SUBSTRING(%[3]s, %[2]s + %[4]d)), %[3]s),
  IF(LAST_INSERT_ID() & %[5]d, CONCAT(%[3]s, %[6]s, %[7]s),
  IF(LAST_INSERT_ID() & %[8]d, CONCAT(LEFT(%[3]s, %[2]s + 15), %[7]s, SUBSTRING(%[3]s, %[2]s + %[4]d)), %[3]s)))`,
		heldMark, at, base, entryWidth, appendBit, s.me, stamp, refreshBit)
}

// takeSQL is tableAcquireSQL taking the row only when free with its queue
// empty or headed by this driver (which leaves it), else changing nothing.
// Without fair hand-off: acquireSQL.
func (s settings) takeSQL() string {
	if s.liveness == 0 {
		return s.acquireSQL()
	}
	free := "expires_at < UTC_TIMESTAMP(6)"
	outcome := fmt.Sprintf("IF(%[1]s AND (queue = '' OR LEFT(queue, 16) = VALUES(taken_by)), %[3]s, %[2]d + GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), 1))",
		free, heldMark, nextFence)
	return fmt.Sprintf(tableAcquireSQL, s.table, outcome, fmt.Sprintf("IF(LAST_INSERT_ID() < %d, SUBSTRING(queue, %d), queue)", heldMark, entryWidth+1), heldMark, s.floorTable)
}

// acquireSQL is tableAcquireSQL for the driver's table and settings.
func (s settings) acquireSQL() string {
	q := queueSQL{q: "queue", me: "VALUES(taken_by)", l: s.liveness.Milliseconds()}
	return fmt.Sprintf(tableAcquireSQL, s.table, q.outcome(), q.newQueue(), heldMark, s.floorTable)
}

// pollSQL reads the watched rows (keyState). Parameters: driver id, then
// the hashes. The id is CAST to BINARY: as a derived table's text column
// its invalid UTF-8 would turn into '?'.
func (s settings) pollSQL(keys int) string {
	q := queueSQL{q: "queue", me: "m.me", l: s.liveness.Milliseconds()}
	return fmt.Sprintf(`SELECT name_hash, expires_at < UTC_TIMESTAMP(6), expires_at >= UTC_TIMESTAMP(6) AND taken_by = m.me,
 IF(INSTR(queue, m.me) > 0, (INSTR(queue, m.me) - 1) DIV %[1]d, -1), LENGTH(queue) DIV %[1]d, %[2]s
FROM %[3]s, (SELECT CAST(? AS BINARY) AS me) AS m WHERE name_hash IN (%[4]s)`, entryWidth, q.lead(), s.table, marks("?", keys))
}

// fastPoll is how often a driver polls the keys whose queue it heads:
// PollInterval/10, at most WaiterLiveness/4 (so its attempts stamp its
// entry in time), at least 1ms.
func (s settings) fastPoll() time.Duration {
	p := s.poll / 10
	if s.liveness > 0 {
		p = min(p, s.liveness/4)
	}
	return max(p, time.Millisecond)
}

// pollEvery is how often a driver polls a key it is queued for at pos:
// fastPoll at the head, then 2, 4, 6 … × fastPoll, at most PollInterval.
func (s settings) pollEvery(pos int) time.Duration {
	if pos <= 0 {
		return s.fastPoll()
	}
	return min(s.poll, time.Duration(2*pos)*s.fastPoll())
}
