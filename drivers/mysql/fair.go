package mysql

import (
	"fmt"
	"time"
)

// Fair hand-off in table mode.
//
// MySQL cannot push a release to the waiters of other processes: they poll.
// Without help, a process that releases and asks again at once finds the row
// free before any other process's next poll and takes it again ("barging"),
// so the waiters of other processes may wait many turns. So each row also
// holds one reservation: the driver that has waited longest (wanted_by,
// wanted_since) while it keeps asking (wanted_until = last ask +
// WaiterLiveness). While a reservation is live a free row may be taken only
// by its driver or by a driver that has waited at least as long; the others'
// attempts fail and answer the reservation's remaining time.
//
// When the reserved driver takes the lock, the reservation becomes
// anonymous (wanted_by = ”), lasting at most WaiterLiveness/4 more: it
// then only keeps the taker (taken_by) from taking the lock again, while
// the other waiters, seeing it anonymous, ask again and the oldest claims
// it. Without other waiters it runs out and the taker's next acquisition is
// delayed by at most that.
//
// Every decision is made by the one acquire statement: its first assignment
// computes the outcome from the row as it was and stores it in
// LAST_INSERT_ID (which the client reads from the OK packet); the later
// assignments read it back with LAST_INSERT_ID(), so that the order in
// which they change columns does not matter.
//
// The outcome, a BIGINT:
//
//	< heldMark                 taken: the fence, plus fairFlag if the taker's own reservation became anonymous
//	>= heldMark                not taken: heldMark + remaining µs (the holder's ttl, or the reservation's
//	                           when the row is free but reserved), plus fairFlag if this attempt claimed
//	                           or refreshed the reservation
const fairFlag = 1 << 61

// tableAcquireSQL inserts the row or takes over an expired one, honouring
// the reservation; see the comment above. Parameters: name_hash, token,
// ttl µs, name, waited µs (how long this driver has been waiting for the
// key, 0 if not), driver id. %[1]s is the quoted table, %[2]d heldMark,
// %[3]d fairFlag, %[4]d WaiterLiveness µs (0: no reservations), %[5]d the
// anonymous reservation's most remaining µs. expires_at, which every
// condition reads, is assigned last; the others follow LAST_INSERT_ID().
const tableAcquireSQL = `INSERT INTO %[1]s (name_hash, token, fence, expires_at, name, wanted_since, taken_by)
VALUES (?, ?, LAST_INSERT_ID(1), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?, UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND, ?)
ON DUPLICATE KEY UPDATE
 fence = IF(LAST_INSERT_ID(CASE
  WHEN expires_at < UTC_TIMESTAMP(6) AND (%[4]d = 0 OR wanted_until < UTC_TIMESTAMP(6) OR wanted_by = VALUES(taken_by)
   OR (wanted_by = '' AND taken_by <> VALUES(taken_by)) OR (wanted_by <> '' AND VALUES(wanted_since) <= wanted_since))
  THEN fence + 1 + IF(wanted_until >= UTC_TIMESTAMP(6) AND wanted_by = VALUES(taken_by), %[3]d, 0)
  ELSE %[2]d + IF(%[4]d > 0 AND (wanted_until < UTC_TIMESTAMP(6) OR wanted_by = VALUES(taken_by)
   OR (wanted_by = '' AND taken_by <> VALUES(taken_by)) OR (wanted_by <> '' AND VALUES(wanted_since) < wanted_since)), %[3]d, 0)
   + GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), IF(expires_at < UTC_TIMESTAMP(6), wanted_until, expires_at)), 1)
  END) < %[2]d, fence + 1, fence),
 token = IF(LAST_INSERT_ID() < %[2]d, VALUES(token), token),
 name = IF(LAST_INSERT_ID() < %[2]d, VALUES(name), name),
 wanted_by = IF(LAST_INSERT_ID() & %[3]d, IF(LAST_INSERT_ID() < %[2]d, '', VALUES(taken_by)), wanted_by),
 wanted_since = IF(LAST_INSERT_ID() >= %[2]d AND LAST_INSERT_ID() & %[3]d, VALUES(wanted_since), wanted_since),
 wanted_until = IF(LAST_INSERT_ID() & %[3]d, IF(LAST_INSERT_ID() < %[2]d,
  LEAST(wanted_until, UTC_TIMESTAMP(6) + INTERVAL %[5]d MICROSECOND), UTC_TIMESTAMP(6) + INTERVAL %[4]d MICROSECOND), wanted_until),
 taken_by = IF(LAST_INSERT_ID() < %[2]d, VALUES(taken_by), taken_by),
 expires_at = IF(LAST_INSERT_ID() < %[2]d, VALUES(expires_at), expires_at)`

// acquireSQL is tableAcquireSQL for the driver's table and settings.
func (s settings) acquireSQL() string {
	return fmt.Sprintf(tableAcquireSQL, s.table, heldMark, fairFlag, s.liveness.Microseconds(), s.anonWindow().Microseconds())
}

// anonWindow is how long at most a reservation stays anonymous after its
// driver took the lock.
func (s settings) anonWindow() time.Duration {
	return max(s.liveness/4, 2*s.poll)
}

// fastPoll is how often a driver polls the keys it holds the reservation
// of (or may claim): the hand-off's race is this short.
func (s settings) fastPoll() time.Duration {
	return max(s.poll/10, time.Millisecond)
}
