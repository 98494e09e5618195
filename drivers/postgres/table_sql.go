package postgres

import (
	"crypto/sha256"
	"fmt"
	"strings"
)

// tableStatements are the table driver's SQL texts.
type tableStatements struct {
	// the fence-taking statements in two forms (fencing)
	plain, guarded                          fencedStatements
	release, notify, extend, renew, inspect string
	list                                    string
	reclaim                                 string // table_reclaim.go
}

// fencedStatements are the table driver's statements that take a fence.
type fencedStatements struct {
	take, acquire, refence, handover string
}

// driverChannel is the prefix of a driver's own NOTIFY channel (followed by
// its id): a table release notifies there the driver first in the row's
// queue, so that its listener alone wakes, not every listener of the
// database. Releases without a live queued driver, and advisory ones,
// notify the shared channel.
const driverChannel = "mutexfx_"

// ownChannel is the channel a driver with this id listens on for the
// releases it is next for.
func ownChannel(id string) string { return driverChannel + id }

// asyncHint makes a table statement's commit asynchronous, in its
// RETURNING list (evaluated only for a row it writes, before its commit).
// It is for the writes whose loss in a crash is safe: a release (the row
// stays held until its ttl, as a crashed holder's) and a failed attempt's
// queue entry (its driver queues again at its next retry). Their commits
// then no longer wait for the WAL flush in a logged table, whatever
// synchronousCommit says: a hand-off across processes waited for two
// flushes, the release's and the next holder's take, whose synchronous
// commit flushes the release's record too (bench/postgres -phases).
const asyncHint = "set_config('synchronous_commit', 'off', true)"

func tableSQL(n names, o Options, txnSync bool) tableStatements {
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
	// released and tookOrQueued are the RETURNING columns of a release
	// and of an acquisition attempt: with asyncHint, where commits would
	// wait for the WAL flush (setting it costs ~8 µs a release)
	released, tookOrQueued := synced, "l.token = $3"
	if !o.Unlogged && o.SynchronousCommit != "off" {
		released, tookOrQueued = asyncHint+" IS NOT NULL", "CASE WHEN l.token = $3 THEN true ELSE "+asyncHint+" IS NULL END"
	}
	nextval := nextvalSQL(n)
	// guarded(i) is table mode's fence: NULL, which the NOT NULL fence
	// column refuses (the statement fails, writing nothing), when the
	// server's crash mark differs from $i, the mark this connection read
	// just before its bootCheck: the server recovered from a crash since.
	// A connection that outlived the crash (a client connection of a pooler
	// such as PgBouncer) then runs the check again before it takes a fence
	// (see tableDriver.run).
	guarded := func(i int) string {
		return fmt.Sprintf("CASE WHEN %s = $%d::bigint THEN %s END", crashMarkSQL, i, nextval)
	}
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
			// no row is reclaimed in between (table_reclaim.go).
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
				"RETURNING " + tookOrQueued + " AS took, l.fence, l.expires_at) " +
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
	return tableStatements{
		plain:   tableFenced(func(int) string { return nextval }),
		guarded: tableFenced(guarded),
		// notifies only when drivers are queued for the row: every waiting
		// acquisition is, and an uncontended release then writes no NOTIFY
		// (which every listening backend of the database has to read)
		// and then only the queue's head when it has a live one: it returns
		// the queue, when not empty, and the server's clock, for
		// Release to pick the head and notify it (computed here, in
		// a subquery, it slowed every uncontended release by 10-20 µs: the
		// subquery's plan is set up at each execution, even when skipped)
		release: "UPDATE " + n.table + " SET token = '', expires_at = 'epoch'" +
			" WHERE id = $1 AND token = $2 AND expires_at > now() " +
			"RETURNING " + released + ", CASE WHEN queue <> '{}' THEN queue END, " +
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
		list: "SELECT name, token, fence, extract(epoch FROM expires_at - now())::float8 * 1000 FROM " + n.table +
			" WHERE expires_at > now() AND token <> '' AND left(name, length($1)) = $1",
		// deletes up to $1 rows free (released or expired) that nobody
		// queues for, each under its reclaim lock, exclusive, if it can be
		// had now (table_reclaim.go); the lock is tried last, only for a row that
		// qualifies (equal-cost quals keep their order), so that one
		// statement holds at most $1 of them
		reclaim: "DELETE FROM " + n.table + " WHERE id IN (SELECT c.id FROM " + n.table + " AS c" +
			" WHERE c.expires_at <= now() AND c.queue = '{}' AND " + reclaimLockSQL("pg_try_advisory_xact_lock", "c.id") +
			" LIMIT $1 FOR UPDATE SKIP LOCKED)",
	}
}

// tableSchema is what the table driver needs besides the base schema: the
// table, and its queue column when the table was created without one.
func tableSchema(n names, o Options) []schemaObject {
	unlogged := ""
	if o.Unlogged {
		unlogged = "UNLOGGED "
	}
	return []schemaObject{
		{regclass(n.table) + " IS NOT NULL", []string{"CREATE " + unlogged + "TABLE IF NOT EXISTS " + n.table + ` (
	id bytea PRIMARY KEY,
	name text NOT NULL,
	token text NOT NULL,
	fence bigint NOT NULL,
	expires_at timestamptz NOT NULL,
	queue jsonb NOT NULL DEFAULT '{}'
)`}},
		{regclass(n.table) + " IS NULL OR EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = " + regclass(n.table) +
			" AND NOT attisdropped AND attname = 'queue')",
			[]string{"ALTER TABLE " + n.table + " ADD COLUMN IF NOT EXISTS queue jsonb NOT NULL DEFAULT '{}'"}},
	}
}

// rowID is a lock's primary key in table mode: the SHA-256 of its key, so
// that keys of any length fit a btree index.
func rowID(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
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
