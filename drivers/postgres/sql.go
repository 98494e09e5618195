package postgres

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// statements are the driver's SQL texts, built once from validated, quoted
// identifiers. Lock names, tokens and durations are always parameters.
type statements struct {
	createSequence, createTable, addColumns string

	// the boot marker (bootCheck), both modes
	createBoot, insertBoot, bootCheck string

	// advisory mode
	tryLock, waitLock, unlock, unlockNotify, handover, heldKeys, heldKey, anyHolder string

	// table mode; the fence-taking statements in two forms (fencing)
	plain, guarded                          fencedStatements
	release, notify, extend, renew, inspect string
	reclaim                                 string // reclaim.go
}

// fencedStatements are table mode's statements that take a fence.
type fencedStatements struct {
	take, acquire, refence, handover string
}

// bootGap is how far the fence sequence moves ahead after a server crash
// (bootCheck): more fences than a crash can have forgotten (those taken by
// commits still in the WAL buffers, with synchronous_commit off).
const bootGap = 1 << 32

// crashMarkSQL is the server's crash mark: the time its shared statistics
// were last reset, in µs. Crash recovery resets them (a clean restart
// keeps them; so does a standby until promoted, with its own mark), and
// it costs a function call to read, against a table read for the boot
// marker itself. An administrator resetting them (pg_stat_reset_shared)
// only makes every connection check the marker once more.
const crashMarkSQL = "coalesce((extract(epoch FROM pg_stat_get_bgwriter_stat_reset_time()) * 1000000)::bigint, 0)"

// maxPayload is the longest key sent as a NOTIFY payload (PostgreSQL refuses
// 8000 bytes and more); longer keys are released without a wake-up.
const maxPayload = 7999

// driverChannel is the prefix of a driver's own NOTIFY channel (followed by
// its id): a table release notifies there the driver first in the row's
// queue, so that its listener alone wakes, not every listener of the
// database. Releases without a live queued driver, and advisory ones,
// notify the shared channel.
const driverChannel = "mutexfx_"

// ownChannel is the channel a driver with this id listens on for the
// releases it is next for.
func ownChannel(id string) string { return driverChannel + id }

// buildStatements builds the statements for n and o. With txnSync, the
// table statements set o.SynchronousCommit for their own transaction
// (set_config(…, true)): the form for a pool the application gave, whose
// sessions the driver must not change. Without it, the driver's own
// connections carry the setting from their startup (Options.poolConfig).
func buildStatements(n names, o Options, txnSync bool) statements {
	unlogged := ""
	if o.Unlogged {
		unlogged = "UNLOGGED "
	}
	// s is a one-row CTE every table statement joins: it sets
	// synchronous_commit for the statement's own transaction when asked
	// (txnSync).
	s := "s AS (SELECT)"
	// synced is true, and sets synchronous_commit when asked, in the
	// RETURNING list of the uncontended path's statements: evaluated only
	// for a row they write, before their commit, it costs there far less
	// than joining s.
	synced := "true"
	if txnSync && o.SynchronousCommit != "" {
		s = fmt.Sprintf("s AS MATERIALIZED (SELECT set_config('synchronous_commit', '%s', true))", o.SynchronousCommit)
		synced = fmt.Sprintf("set_config('synchronous_commit', '%s', true) IS NOT NULL", o.SynchronousCommit)
	}
	seq := strings.ReplaceAll(n.sequence, "'", "''") // never contains one: validated
	nextval := fmt.Sprintf("nextval('%s')", seq)
	// guarded(i) is table mode's fence: NULL, which the NOT NULL fence
	// column refuses (the statement fails, writing nothing), when the
	// server's crash mark differs from $i, the mark this connection read
	// just before its bootCheck: the server recovered from a crash since.
	// A connection that outlived the crash (a client connection of a pooler
	// such as PgBouncer) then runs the check again before it takes a fence
	// (see Driver.run).
	guarded := func(i int) string {
		return fmt.Sprintf("CASE WHEN %s = $%d::bigint THEN %s END", crashMarkSQL, i, nextval)
	}
	notify := fmt.Sprintf("CASE WHEN octet_length($%%d) BETWEEN 1 AND %d THEN pg_notify('%s', $%%d) END",
		maxPayload, strings.Trim(n.channel, `"`))
	// advisory keys as pg_locks shows them: classid is the high half, objid
	// the low half, objsubid 1 for the one-bigint form.
	const lockKey = "((classid::bigint << 32) | objid::bigint)"
	const ownLocks = "FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND pid = pg_backend_pid()"
	ttl := "now() + $%d::bigint * interval '1 millisecond'"
	// Table-mode turns. A row's queue holds the drivers waiting for it (a
	// blocking Acquire: $6 true), as {driver id: [arrival ms, last attempt
	// ms]} in the server's clock. An entry is live while its driver retried
	// within the last $7 ms; the head is the live entry that arrived first.
	// take(a): the row a is free and no live waiter queued before the
	// acquirer ($5). queued(a): the acquirer's entry, refreshed. pruned(a):
	// the live entries but the acquirer's. fresh(a): the acquirer's entry
	// was refreshed within the last quarter of $7, so a failed attempt need
	// not write. An attempt that can neither take the row nor needs to
	// refresh its entry only reads it: ON CONFLICT DO UPDATE would lock the
	// row even when its WHERE is false, making every failed poll a durable
	// commit. The inserted row's fence is taken only when the row is
	// missing (a wasted nextval costs: a logged sequence writes WAL every
	// 32 values, and that commit then waits for the flush); when it exists
	// the update takes the fence under the row's lock, and a row deleted
	// meanwhile is inserted with fence 0, which refence replaces.
	const nowMS = "(extract(epoch FROM now()) * 1000)"
	live := "(e.v->>1)::float8 > " + nowMS + " - $7::bigint"
	head := func(a string) string {
		return "(SELECT e.k FROM jsonb_each(" + a + ".queue) AS e(k, v) WHERE " + live +
			" ORDER BY (e.v->>0)::float8, e.k COLLATE \"C\" LIMIT 1)"
	}
	take := func(a string) string {
		return "(" + a + ".expires_at <= now() AND CASE WHEN " + a + ".queue = '{}' THEN true " +
			"ELSE coalesce(" + head(a) + " = $5::text, true) END)"
	}
	fresh := func(a string) string {
		return "coalesce((" + a + ".queue->$5::text->>1)::float8 > " + nowMS + " - $7::bigint / 4, false)"
	}
	// deferred(a): the acquirer is not queued yet and the row is free, for
	// a queued driver to take; asked to ($8), it queues only after that
	// take: writing now could make the taker wait for its commit. An
	// attempt reports itself deferred, to be retried soon, also when the
	// statement's snapshot meant to write but the row, once locked, had
	// changed (released meanwhile: deferred then, or taken).
	deferred := func(a string) string {
		return "($8::bool AND " + a + ".expires_at <= now() AND " + a + ".queue->$5::text IS NULL)"
	}
	write := func(a string) string {
		return "(" + take(a) + " OR ($6::bool AND NOT " + fresh(a) + " AND NOT " + deferred(a) + "))"
	}
	queued := "l.queue || jsonb_build_object($5::text, jsonb_build_array(" +
		"CASE WHEN (l.queue->$5::text->>1)::float8 > " + nowMS + " - $7::bigint " +
		"THEN (l.queue->$5::text->>0)::float8 ELSE " + nowMS + " END, " + nowMS + "))"
	pruned := "CASE WHEN l.queue = '{}' THEN l.queue ELSE coalesce((SELECT jsonb_object_agg(e.k, e.v) " +
		"FROM jsonb_each(l.queue) AS e(k, v) WHERE " + live + " AND e.k <> $5::text), '{}') END"
	left := func(ts string) string { return "extract(epoch FROM " + ts + " - now())::float8 * 1000" }
	// tableFenced builds the fence-taking statements with fence(i) as the
	// fence, $i its parameter if it has one.
	tableFenced := func(fence func(i int) string) fencedStatements {
		return fencedStatements{
			// the uncontended path: a bare UPDATE of a free row nobody queues
			// for, its fence taken under the row's lock. It writes nothing when
			// its WHERE is false (an UPDATE locks only the rows it changes);
			// then, or when the row is missing, acquire decides.
			take: "UPDATE " + n.table + " AS l SET name = $2, token = $3, fence = " + fence(5) +
				", expires_at = " + fmt.Sprintf(ttl, 4) +
				" WHERE l.id = $1 AND l.expires_at <= now() AND l.queue = '{}' RETURNING l.fence, " + synced,
			// A new row's fence is drawn before its insert meets (or not)
			// a row of the same id: under the shared reclaim lock, so that
			// no row is reclaimed in between (reclaim.go).
			acquire: "WITH " + s + ", g AS MATERIALIZED (SELECT " + reclaimLockSQL("pg_advisory_xact_lock_shared", "$1::bytea") + "), ins AS (" +
				"INSERT INTO " + n.table + " AS l (id, name, token, fence, expires_at) " +
				"SELECT $1, $2, $3, CASE WHEN c.id IS NULL THEN " + fence(9) + " ELSE 0 END, " + fmt.Sprintf(ttl, 4) +
				" FROM s CROSS JOIN g LEFT JOIN " + n.table + " AS c ON c.id = $1 WHERE c.id IS NULL OR " + write("c") + " " +
				"ON CONFLICT (id) DO UPDATE SET " +
				"name = CASE WHEN " + take("l") + " THEN excluded.name ELSE l.name END, " +
				"token = CASE WHEN " + take("l") + " THEN excluded.token ELSE l.token END, " +
				"fence = CASE WHEN " + take("l") + " THEN " + fence(9) + " ELSE l.fence END, " +
				"expires_at = CASE WHEN " + take("l") + " THEN excluded.expires_at ELSE l.expires_at END, " +
				"queue = CASE WHEN " + take("l") + " THEN " + pruned + " ELSE " + queued + " END " +
				"WHERE " + write("l") + " " +
				"RETURNING l.token = $3 AS took, l.fence, l.expires_at) " +
				"SELECT took, CASE WHEN took THEN fence ELSE 0 END, " +
				"CASE WHEN took THEN 0 ELSE " + left("expires_at") + " END, false FROM ins UNION ALL " +
				"SELECT false, 0, " + left("expires_at") + ", " + deferred("r") + " OR " + write("r") + " FROM " + n.table +
				" AS r WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM ins)",
			refence: "UPDATE " + n.table + " SET fence = " + fence(3) + " WHERE id = $1 AND token = $2 RETURNING fence",
			// passes the row from token $2 to $3 for $4 ms with the next
			// fence when nobody queues for it, else releases it as release
			// does (and returns the queue for the wake-up)
			handover: "UPDATE " + n.table + " SET " +
				"token = CASE WHEN queue = '{}' THEN $3 ELSE '' END, " +
				"fence = CASE WHEN queue = '{}' THEN " + fence(5) + " ELSE fence END, " +
				"expires_at = CASE WHEN queue = '{}' THEN " + fmt.Sprintf(ttl, 4) + " ELSE 'epoch' END" +
				" WHERE id = $1 AND token = $2 AND expires_at > now() " +
				"RETURNING " + synced + ", queue = '{}', fence, CASE WHEN queue <> '{}' THEN queue END, " +
				"CASE WHEN queue <> '{}' THEN " + nowMS + " END",
		}
	}
	return statements{
		createSequence: "CREATE SEQUENCE IF NOT EXISTS " + n.sequence,
		createTable: "CREATE " + unlogged + "TABLE IF NOT EXISTS " + n.table + ` (
	id bytea PRIMARY KEY,
	name text NOT NULL,
	token text NOT NULL,
	fence bigint NOT NULL,
	expires_at timestamptz NOT NULL,
	queue jsonb NOT NULL DEFAULT '{}'
)`,
		addColumns: "ALTER TABLE " + n.table + " ADD COLUMN IF NOT EXISTS queue jsonb NOT NULL DEFAULT '{}'",
		// the marker's row is inserted with the table: a missing row means
		// the server recovered from a crash since
		createBoot: "CREATE UNLOGGED TABLE IF NOT EXISTS " + n.boot + " (id boolean PRIMARY KEY)",
		insertBoot: "INSERT INTO " + n.boot + " VALUES (true) ON CONFLICT DO NOTHING",
		// puts the marker's row back and, when it was missing, moves the
		// fence sequence bootGap ahead, in one durable commit
		bootCheck: "WITH s AS MATERIALIZED (SELECT set_config('synchronous_commit', 'on', true)), " +
			"i AS (INSERT INTO " + n.boot + " (id) SELECT true FROM s ON CONFLICT (id) DO NOTHING RETURNING id) " +
			fmt.Sprintf("SELECT setval('%s', nextval('%s') + %d) FROM i", seq, seq, bootGap),

		// one expression: the fence (never 0) when the lock was free, else 0
		tryLock: "SELECT CASE WHEN pg_try_advisory_lock($1) THEN " + nextval + " ELSE 0 END",
		waitLock: "WITH t AS MATERIALIZED (SELECT set_config('lock_timeout', $2, false) AS v), " +
			"l AS MATERIALIZED (SELECT pg_advisory_lock($1) FROM t) " +
			"SELECT " + nextval + " FROM l",
		unlockNotify: "WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok) " +
			"SELECT ok, CASE WHEN ok THEN " + fmt.Sprintf(notify, 2, 2) + " END IS NULL FROM u",
		unlock: "SELECT pg_advisory_unlock($1)",
		// unlocks, then takes the lock again with a new fence (> 0) when
		// nobody took it meanwhile: the server grants a released lock to
		// the sessions waiting for it in the same step (ProcLockWakeup),
		// so a waiting session gets it first and the statement answers -1;
		// 0 when the lock was not held
		handover: "WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok) " +
			"SELECT CASE WHEN NOT ok THEN 0 WHEN pg_try_advisory_lock($1) THEN " + nextval + " ELSE -1 END FROM u",
		heldKeys: "SELECT " + lockKey + " " + ownLocks,
		heldKey:  "SELECT EXISTS (SELECT 1 " + ownLocks + " AND " + lockKey + " = $1)",
		anyHolder: "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted" +
			" AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND " + lockKey + " = $1)",

		plain:   tableFenced(func(int) string { return nextval }),
		guarded: tableFenced(guarded),
		// notifies only when drivers are queued for the row: every waiting
		// acquisition is, and an uncontended release then writes no NOTIFY
		// (which every listening backend of the database has to read)
		// and then only the queue's head when it has a live one: it returns
		// the queue, when not empty, and the server's clock, for
		// tableRelease to pick the head and notify it (computed here, in
		// a subquery, it slowed every uncontended release by 10-20 µs: the
		// subquery's plan is set up at each execution, even when skipped)
		release: "UPDATE " + n.table + " SET token = '', expires_at = 'epoch'" +
			" WHERE id = $1 AND token = $2 AND expires_at > now() " +
			"RETURNING " + synced + ", CASE WHEN queue <> '{}' THEN queue END, " +
			"CASE WHEN queue <> '{}' THEN " + nowMS + " END",
		// the release's NOTIFY: a hint, whose commit need not wait for
		// the WAL flush (pg_notify assigns the transaction an id, so its
		// commit writes a record)
		notify: "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)",
		extend: "WITH " + s + " UPDATE " + n.table + " SET expires_at = " + fmt.Sprintf(ttl, 3) +
			" FROM s WHERE id = $1 AND token = $2 AND expires_at > now()",
		renew: "WITH " + s + " UPDATE " + n.table + " AS t SET expires_at = now() + u.ttl * interval '1 millisecond' " +
			"FROM s, unnest($1::bytea[], $2::text[], $3::bigint[]) AS u(id, token, ttl) " +
			"WHERE t.id = u.id AND t.token = u.token AND t.expires_at > now() RETURNING t.id, t.token",
		inspect: "SELECT token, fence, extract(epoch FROM expires_at - now())::float8 * 1000 FROM " + n.table +
			" WHERE id = $1 AND expires_at > now()",
		// deletes up to $1 rows free (released or expired) that nobody
		// queues for, each under its reclaim lock, exclusive, if it can be
		// had now (reclaim.go); the lock is tried last, only for a row that
		// qualifies (equal-cost quals keep their order), so that one
		// statement holds at most $1 of them
		reclaim: "DELETE FROM " + n.table + " WHERE id IN (SELECT c.id FROM " + n.table + " AS c" +
			" WHERE c.expires_at <= now() AND c.queue = '{}' AND " + reclaimLockSQL("pg_try_advisory_xact_lock", "c.id") +
			" LIMIT $1 FOR UPDATE SKIP LOCKED)",
	}
}

// advisoryKey is the 64-bit advisory lock key of a lock key: the first 8
// bytes of its SHA-256. Two keys with the same hash exclude each other
// (false contention), nothing worse.
func advisoryKey(key string) int64 {
	sum := sha256.Sum256([]byte(key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// rowID is a lock's primary key in table mode: the SHA-256 of its key, so
// that keys of any length fit a btree index.
func rowID(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// payload is the NOTIFY payload for key: the key, or "" (no wake-up) when
// it is too long.
func payload(key string) string {
	if len(key) > maxPayload || !isText(key) {
		return ""
	}
	return key
}

// isText reports whether key can be sent as PostgreSQL text: valid UTF-8
// without NUL. Keys are any bytes; one that is not text goes unnotified
// (its waiters poll) and is shown in the table's name column by shownName.
func isText(key string) bool {
	return utf8.ValidString(key) && strings.IndexByte(key, 0) < 0
}

// shownName is key as the table's name column shows it: key itself when it
// is text, else with U+FFFD for NUL and invalid bytes. The column is for
// people reading the table; a row is found by its id, the key's SHA-256.
func shownName(key string) string {
	if isText(key) {
		return key
	}
	return strings.ToValidUTF8(strings.ReplaceAll(key, "\x00", "\uFFFD"), "\uFFFD")
}
