package postgres

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// advisoryStatements are the advisory driver's SQL texts.
type advisoryStatements struct {
	tryLock, waitLock, unlock, unlockNotify, handover, heldKeys, heldKey, holder, identify string
}

func advisorySQL(n names) advisoryStatements {
	nextval := nextvalSQL(n)
	notify := fmt.Sprintf("CASE WHEN octet_length($2) BETWEEN 1 AND %d THEN pg_notify('%s', $2) END",
		maxPayload, strings.Trim(n.channel, `"`))
	// advisory keys as pg_locks shows them: classid is the high half, objid
	// the low half, objsubid 1 for the one-bigint form.
	const lockKey = "((classid::bigint << 32) | objid::bigint)"
	const advisory = "FROM pg_locks AS l WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
	const own = advisory + " AND l.pid = pg_backend_pid()"
	return advisoryStatements{
		// one expression: the fence (never 0) when the lock was free, else 0
		tryLock: "SELECT CASE WHEN pg_try_advisory_lock($1) THEN " + nextval + " ELSE 0 END",
		waitLock: "WITH t AS MATERIALIZED (SELECT set_config('lock_timeout', $2, false) AS v), " +
			"l AS MATERIALIZED (SELECT pg_advisory_lock($1) FROM t) " +
			"SELECT " + nextval + " FROM l",
		// 1 when unlocked, else 0; unlockNotify then notifies the channel
		// with $2, the key
		unlock: "SELECT pg_advisory_unlock($1)::int",
		unlockNotify: "WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok) " +
			"SELECT CASE WHEN NOT ok THEN 0 WHEN " + notify + " IS NULL THEN 1 ELSE 1 END FROM u",
		// unlocks, then takes the lock again with a new fence (> 0) when
		// nobody took it meanwhile: the server grants a released lock to
		// the sessions waiting for it in the same step (ProcLockWakeup),
		// so a waiting session gets it first and the statement answers -1;
		// 0 when the lock was not held
		handover: "WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok) " +
			"SELECT CASE WHEN NOT ok THEN 0 WHEN pg_try_advisory_lock($1) THEN " + nextval + " ELSE -1 END FROM u",
		heldKeys: "SELECT " + lockKey + " " + own,
		heldKey:  "SELECT EXISTS (SELECT 1 " + own + " AND " + lockKey + " = $1)",
		// the identity at the end of the holding session's
		// application_name (identify), one row when the lock is held in
		// this database
		holder: "SELECT coalesce((SELECT substring(a.application_name FROM '(~[^~]*~[^~]*~[0-9]+)$') " +
			"FROM pg_stat_activity AS a WHERE a.pid = l.pid), '') " +
			advisory + " AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND " +
			lockKey + " = $1 LIMIT 1",
		identify: "SELECT set_config('application_name', $1, false)",
	}
}

// advisoryKey is the 64-bit advisory lock key of a lock key: the first 8
// bytes of its SHA-256. Two keys with the same hash exclude each other
// (false contention), nothing worse.
func advisoryKey(key string) int64 {
	sum := sha256.Sum256([]byte(key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// lockTimeout formats a Wait as a lock_timeout value in milliseconds, at
// least 1 (0 would mean no limit).
func lockTimeout(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10)
}

// maxIdentity is the longest identity a session shows in its
// application_name (PostgreSQL keeps 63 bytes of it).
const maxIdentity = 63
