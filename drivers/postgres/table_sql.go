package postgres

import (
	"fmt"
	"strings"
)

// tableStatements are the table driver's SQL texts (fencing picks a form).
type tableStatements struct {
	plain, guarded                                     fencedStatements
	free, leave, extend, renew, inspect, list, reclaim string
}

// fencedStatements take a fence (a release may grant the lock to the queue's head).
type fencedStatements struct{ take, turn, acquire, refence, release, handover string }

// ownChannel is driver id's channel, where a release wakes its queue's head alone.
func ownChannel(id string) string { return "mutexfx_" + id }

// grantChannel is driver id's channel, where a release tells it of a grant.
func grantChannel(id string) string { return "mutexfx_g_" + id }

// asyncHint, in a RETURNING list (evaluated only for a row written), makes
// the commit asynchronous: for the writes a crash may lose, a release (the
// row stays held until its ttl) and a failed attempt's queue entry.
const asyncHint = "set_config('synchronous_commit', 'off', true)"

func tableSQL(n names, o Options, txnSync bool) tableStatements {
	// s, a one-row CTE every statement joins, sets synchronous_commit for
	// the transaction when asked (txnSync); synced does so, cheaper, in the
	// RETURNING list of the uncontended path's statements.
	s := "s AS (SELECT)"
	synced := "true"
	if txnSync && o.SynchronousCommit != "" {
		s = fmt.Sprintf("s AS MATERIALIZED (SELECT set_config('synchronous_commit', '%s', true))", o.SynchronousCommit)
		synced = fmt.Sprintf("set_config('synchronous_commit', '%s', true) IS NOT NULL", o.SynchronousCommit)
	}
	// a release's and an attempt's RETURNING columns: with asyncHint where
	// commits would wait for the WAL flush
	released, tookOrQueued := synced, "l.token = $3"
	if !o.Unlogged && o.SynchronousCommit != "off" {
		released, tookOrQueued = asyncHint+" IS NOT NULL", "CASE WHEN l.token = $3 THEN true ELSE "+asyncHint+" IS NULL END"
	}
	nextval := nextvalSQL(n)
	shared := "'" + strings.Trim(n.channel, `"`) + "'"
	// guarded(i) is NULL, which the NOT NULL fence column refuses, when the
	// server's crash mark differs from $i, the one this connection read
	// before its bootCheck (run then checks again).
	guarded := func(i int) string {
		return fmt.Sprintf("CASE WHEN %s = $%d::bigint THEN %s END", crashMarkSQL, i, nextval)
	}
	ttl := "now() + $%d::bigint * interval '1 millisecond'"
	// Turns. A row's queue holds its waiting drivers ($6: blocking), {id:
	// [arrival ms, last attempt ms, token, ttl ms, listener pid]} (the
	// last three registered, for grants, when $10 is the pid), live
	// while retried within $7 ms; the head is the live entry that arrived
	// first. take(a): row a is free and no live waiter queued before the
	// acquirer ($5). queued: its entry, refreshed; pruned: the live entries
	// but its. fresh(a): its entry is under $7/4 old (and registered for the
	// call, when it registers): a failed attempt need not write (lock the
	// row), only read. The insert draws a fence only for a missing row, the
	// update under the row's lock; a row deleted meanwhile gets fence 0
	// (refence).
	live := liveSQL("$7::bigint")
	take := func(a string) string {
		return "(" + a + ".expires_at <= now() AND CASE WHEN " + a + ".queue = '{}' THEN true " +
			"ELSE coalesce(" + headSQL(a+".queue", "$7::bigint") + " = $5::text, true) END)"
	}
	fresh := func(a string) string {
		return "coalesce((" + a + ".queue->$5::text->>1)::float8 > " + nowMS + " - $7::bigint / 4 AND " +
			"($10::int IS NULL OR " + a + ".queue->$5::text->>2 = $3::text), false)"
	}
	// deferred(a): the acquirer is not queued and the row is free for a
	// queued driver; asked to ($8), it queues only after that one's take.
	// An attempt is also reported deferred (retried soon) when its snapshot
	// meant to write but the locked row had changed.
	deferred := func(a string) string {
		return "($8::bool AND " + a + ".expires_at <= now() AND " + a + ".queue->$5::text IS NULL)"
	}
	// mine(a): the acquirer's token holds the row (a grant): the attempt
	// reports it taken, writing nothing
	mine := func(a string) string { return "(" + a + ".token = $3 AND " + a + ".expires_at > now())" }
	write := func(a string) string {
		return "(" + take(a) + " OR ($6::bool AND NOT " + mine(a) + " AND NOT " + fresh(a) + " AND NOT " + deferred(a) + "))"
	}
	// a new entry arrives at $9 (attemptOpts.arrival, NULL: now) if that is
	// recent: a deferred driver keeps its place
	arrival := "CASE WHEN (l.queue->$5::text->>1)::float8 > " + nowMS + " - $7::bigint " +
		"THEN (l.queue->$5::text->>0)::float8 WHEN $9::float8 > " + nowMS + " - $7::bigint " +
		"THEN least($9::float8, " + nowMS + ") ELSE " + nowMS + " END"
	queued := "l.queue || jsonb_build_object($5::text, CASE WHEN $10::int IS NULL " +
		"THEN jsonb_build_array(" + arrival + ", " + nowMS + ") " +
		"ELSE jsonb_build_array(" + arrival + ", " + nowMS + ", $3::text, $4::bigint, $10::int) END)"
	pruned := "CASE WHEN l.queue = '{}' THEN l.queue ELSE coalesce((SELECT jsonb_object_agg(e.k, e.v) " +
		"FROM jsonb_each(l.queue) AS e(k, v) WHERE " + live + " AND e.k <> $5::text), '{}') END"
	// wake(i) tells the grantee, or notifies the queue's head of key $i
	// (NULL: none), with the wake function, called only when drivers
	// queue (a subquery here would be planned for every release)
	wake := func(i int) string {
		return fmt.Sprintf("CASE WHEN queue <> '{}' AND $%d::text IS NOT NULL THEN %s(queue, token, fence, $%d::text, %d, %s) END",
			i, n.wake, i, WaiterLiveness.Milliseconds(), shared)
	}
	// A release grants the row to the head of its queue when it registered:
	// assigned(h, cols) sets the columns from a sub-SELECT where h.g is the
	// head (the head function's answer, NULL when none is live), found when
	// drivers queue (once: a function call per column would cost more).
	assigned := func(holder string, cols ...string) string {
		return fmt.Sprintf("(token, fence, expires_at, queue) = (SELECT %s, CASE WHEN queue = '{}' THEN queue ELSE %s(queue, %s, h.g) END "+
			"FROM (SELECT CASE WHEN queue = '{}' THEN NULL ELSE %s(queue, %s, %d) END AS g) AS h)",
			strings.Join(cols, ", "), n.after, holder, n.head, holder, WaiterLiveness.Milliseconds())
	}
	const granted = "h.g->>3 = 'true'"
	grantTTL := "now() + (h.g->>2)::bigint * interval '1 millisecond'"
	left := func(ts string) string { return "extract(epoch FROM " + ts + " - now())::float8 * 1000" }
	// tableFenced builds them with fence(i) as the fence ($i: its parameter, if any)
	tableFenced := func(fence func(i int) string) fencedStatements {
		return fencedStatements{
			// the uncontended path: a bare UPDATE of a free row nobody queues
			// for (it locks only a row it changes); else acquire decides
			take: "UPDATE " + n.table + " AS l SET token = $2, fence = " + fence(4) +
				", expires_at = " + fmt.Sprintf(ttl, 3) +
				" WHERE l.id = $1 AND l.expires_at <= now() AND l.queue = '{}' RETURNING l.fence, " + synced,
			// a woken waiter's turn ($4: the driver, $5: the liveness),
			// dropping its queue entry; else acquire decides
			turn: "UPDATE " + n.table + " AS l SET token = $2, fence = " + fence(6) +
				", expires_at = " + fmt.Sprintf(ttl, 3) + ", queue = " + turnParams.Replace(pruned) +
				" WHERE l.id = $1 AND " + turnParams.Replace(take("l")) + " RETURNING l.fence, " + synced,
			// a new row's fence is drawn under the shared reclaim lock
			acquire: "WITH " + s + ", g AS MATERIALIZED (SELECT " + reclaimLockSQL("pg_advisory_xact_lock_shared", "$1::bytea") + "), ins AS (" +
				"INSERT INTO " + n.table + " AS l (id, name, token, fence, expires_at) " +
				"SELECT $1, $2, $3, CASE WHEN c.id IS NULL THEN " + fence(11) + " ELSE 0 END, " + fmt.Sprintf(ttl, 4) +
				" FROM s CROSS JOIN g LEFT JOIN " + n.table + " AS c ON c.id = $1 WHERE c.id IS NULL OR " + write("c") + " " +
				"ON CONFLICT (id) DO UPDATE SET " +
				"name = CASE WHEN " + take("l") + " THEN excluded.name ELSE l.name END, " +
				"token = CASE WHEN " + take("l") + " THEN excluded.token ELSE l.token END, " +
				"fence = CASE WHEN " + take("l") + " THEN " + fence(11) + " ELSE l.fence END, " +
				"expires_at = CASE WHEN " + take("l") + " THEN excluded.expires_at ELSE l.expires_at END, " +
				"queue = CASE WHEN " + take("l") + " THEN " + pruned + " ELSE " + queued + " END " +
				"WHERE " + write("l") + " " +
				"RETURNING " + tookOrQueued + " AS took, l.fence, l.expires_at, (l.queue->$5::text->>1)::float8 AS stamp) " +
				"SELECT took, CASE WHEN took THEN fence ELSE 0 END, " +
				"CASE WHEN took THEN 0 ELSE " + left("expires_at") + " END, false, " + nowMS + ", stamp FROM ins UNION ALL " +
				"SELECT " + mine("r") + ", CASE WHEN " + mine("r") + " THEN r.fence ELSE 0 END, CASE WHEN " + mine("r") + " THEN 0 ELSE " +
				left("expires_at") + " END, " + deferred("r") + " OR " + write("r") + ", " + nowMS + ", (r.queue->$5::text->>1)::float8 FROM " + n.table +
				" AS r WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM ins)",
			refence: "UPDATE " + n.table + " SET fence = " + fence(3) + " WHERE id = $1 AND token = $2 RETURNING fence",
			// frees the row if $2 holds it, or grants it to the head of its
			// queue ($3 as wake's); a grant's commit waits for the WAL
			release: "UPDATE " + n.table + " SET " + assigned("$2",
				"CASE WHEN "+granted+" THEN h.g->>1 ELSE '' END",
				"CASE WHEN "+granted+" THEN "+fence(4)+" ELSE fence END",
				"CASE WHEN "+granted+" THEN "+grantTTL+" ELSE 'epoch' END") +
				" WHERE id = $1 AND token = $2 AND expires_at > now() RETURNING CASE WHEN token = '' THEN " + released +
				" ELSE " + synced + " END, " + wake(3),
			// passes the row from $2 to $3 for $4 ms when no live driver
			// queues for it, else releases it as release does ($5 as wake's)
			handover: "UPDATE " + n.table + " SET " + assigned("$2",
				"CASE WHEN h.g IS NULL THEN $3 WHEN "+granted+" THEN h.g->>1 ELSE '' END",
				"CASE WHEN h.g IS NULL OR "+granted+" THEN "+fence(6)+" ELSE fence END",
				"CASE WHEN h.g IS NULL THEN "+fmt.Sprintf(ttl, 4)+" WHEN "+granted+" THEN "+grantTTL+" ELSE 'epoch' END") +
				" WHERE id = $1 AND token = $2 AND expires_at > now() " +
				"RETURNING " + synced + ", token = $3, fence, CASE WHEN token <> $3 THEN " + wake(5) + " END",
		}
	}
	return tableStatements{
		plain:   tableFenced(func(int) string { return nextval }),
		guarded: tableFenced(guarded),
		// the uncontended release: frees the row if $2 holds it and nobody
		// queues for it (else release decides)
		free: "UPDATE " + n.table + " SET token = '', expires_at = 'epoch'" +
			" WHERE id = $1 AND token = $2 AND expires_at > now() AND queue = '{}' RETURNING " + released,
		// unregisters call $3 from driver $2's entry (which keeps its place
		// until it dies); reports whether a release granted the call the row
		leave: "UPDATE " + n.table + " SET queue = jsonb_set(queue, ARRAY[$2::text], (queue->$2::text) - 4 - 3 - 2) " +
			"WHERE id = $1 AND queue->$2::text->>2 = $3::text RETURNING token = $3::text AND expires_at > now()",
		extend: "WITH " + s + " UPDATE " + n.table + " SET expires_at = " + fmt.Sprintf(ttl, 3) +
			" FROM s WHERE id = $1 AND token = $2 AND expires_at > now()",
		renew: "WITH " + s + " UPDATE " + n.table + " AS t SET expires_at = now() + u.ttl * interval '1 millisecond' " +
			"FROM s, unnest($1::bytea[], $2::text[], $3::bigint[]) AS u(id, token, ttl) " +
			"WHERE t.id = u.id AND t.token = u.token AND t.expires_at > now() RETURNING t.id, t.token",
		// the ttl left in whole µs, not an interval: pgx parses only the
		// default IntervalStyle of the simple protocol's text form
		inspect: "SELECT token, fence, (extract(epoch FROM expires_at - now()) * 1000000)::int8 FROM " + n.table +
			" WHERE id = $1 AND expires_at > now()",
		list: "SELECT name, token, fence, (extract(epoch FROM expires_at - now()) * 1000000)::int8 FROM " + n.table +
			" WHERE expires_at > now() AND token <> '' AND left(name, length($1)) = $1",
		// deletes up to $1 free rows no live waiter queues for (liveSQL as a jsonpath: a
		// subquery's cost would count for every row) whose reclaim lock, tried last, is free
		reclaim: "DELETE FROM " + n.table + " WHERE id IN (SELECT c.id FROM " + n.table + " AS c WHERE c.expires_at <= now() AND " +
			"CASE WHEN c.queue = '{}' OR NOT jsonb_path_exists(c.queue, '$.*[1] ? (@ > $t)', jsonb_build_object('t', " + nowMS +
			fmt.Sprintf(" - %d)) THEN %s END LIMIT $1 FOR UPDATE SKIP LOCKED)", WaiterLiveness.Milliseconds(), reclaimLockSQL("pg_try_advisory_xact_lock", "c.id")),
	}
}

// turnParams renumbers acquire's parameters for turn: id $5 → $4, liveness $7 → $5.
var turnParams = strings.NewReplacer("$5::text", "$4::text", "$7::bigint", "$5::bigint")

// nowMS is the server's clock in ms, as a row's queue records it.
const nowMS = "(extract(epoch FROM now()) * 1000)"

// liveSQL is true for a queue entry e(k, v) retried within live ms.
func liveSQL(live string) string { return "(e.v->>1)::float8 > " + nowMS + " - " + live }

// headOrder picks a queue's head among entries e(k, v): the first arrived
// (the smallest id among equals).
const headOrder = " ORDER BY (e.v->>0)::float8, e.k COLLATE \"C\" LIMIT 1"

// headSQL selects the driver of queue's first-arrived live entry, or NULL.
func headSQL(queue, live string) string {
	return "(SELECT e.k FROM jsonb_each(" + queue + ") AS e(k, v) WHERE " + liveSQL(live) + headOrder + ")"
}

// wakeSQL creates the function a release notifies with: the driver it
// granted the row to (the queued entry holding the row's new token) on its
// grantChannel, with "fence,token"; else the head of the row's queue on its
// ownChannel, or with none live the shared channel, with the key.
func wakeSQL(n names) string {
	return "CREATE OR REPLACE FUNCTION " + n.wake + "(queue jsonb, token text, fence bigint, key text, live bigint, shared text) " +
		"RETURNS boolean LANGUAGE plpgsql VOLATILE AS $f$ DECLARE g text; BEGIN " +
		"SELECT e.k INTO g FROM jsonb_each(queue) AS e(k, v) WHERE token <> '' AND e.v->>2 = token LIMIT 1; " +
		"IF g IS NOT NULL THEN PERFORM pg_notify('" + grantChannel("") + "' || g, fence || ',' || token); " +
		"ELSE PERFORM pg_notify(coalesce('" + ownChannel("") + "' || " + headSQL("queue", "live") + ", shared), key); END IF; " +
		"RETURN true; END $f$"
}

// headFnSQL creates the function a release of holder's row finds the head
// of its queue with: the live entry that arrived first, not holder's, as
// [driver, token, ttl ms, grantable], or NULL. Grantable: it registered a
// call and its listener's backend is alive (a crashed waiter's is gone).
// PL/pgSQL: its plan is kept for the session, an SQL function's is not.
func headFnSQL(n names) string {
	return "CREATE OR REPLACE FUNCTION " + n.head + "(queue jsonb, holder text, live bigint) RETURNS jsonb LANGUAGE plpgsql STABLE AS $f$ " +
		"BEGIN RETURN (SELECT jsonb_build_array(e.k, e.v->>2, (e.v->>3)::bigint, CASE WHEN jsonb_array_length(e.v) >= 5 " +
		"THEN EXISTS (SELECT FROM pg_stat_get_activity((e.v->>4)::int)) ELSE false END) " +
		"FROM jsonb_each(queue) AS e(k, v) WHERE " + liveSQL("live") + " AND e.v->>2 IS DISTINCT FROM holder" + headOrder + "); END $f$"
}

// afterFnSQL creates the function giving a row's queue after holder's
// release, given its head g: holder's entries dropped, a granted head's
// kept with its token (for the wake function) but dead.
func afterFnSQL(n names) string {
	return "CREATE OR REPLACE FUNCTION " + n.after + "(queue jsonb, holder text, g jsonb) RETURNS jsonb LANGUAGE plpgsql STABLE AS $f$ " +
		"BEGIN RETURN (SELECT coalesce(jsonb_object_agg(e.k, CASE WHEN e.k = g->>0 AND g->>3 = 'true' " +
		"THEN jsonb_set(e.v, '{1}', '0') ELSE e.v END), '{}') FROM jsonb_each(queue) AS e(k, v) " +
		"WHERE e.v->>2 IS DISTINCT FROM holder); END $f$"
}

// tableSchema is the table, its queue column (older tables lack it) and
// the functions a release runs.
func tableSchema(n names, o Options) []schemaObject {
	unlogged := ""
	if o.Unlogged {
		unlogged = "UNLOGGED "
	}
	return []schemaObject{
		{"to_regprocedure('" + n.head + "(jsonb, text, bigint)') IS NOT NULL", []string{headFnSQL(n)}},
		{"to_regprocedure('" + n.after + "(jsonb, text, jsonb)') IS NOT NULL", []string{afterFnSQL(n)}},
		{"to_regprocedure('" + n.wake + "(jsonb, text, bigint, text, bigint, text)') IS NOT NULL", []string{wakeSQL(n)}},
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

// shownName is key for the name column: U+FFFD for NUL and invalid bytes.
func shownName(key string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(key, "\x00", "\uFFFD"), "\uFFFD")
}
