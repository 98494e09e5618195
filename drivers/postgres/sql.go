package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The SQL both drivers build from validated, quoted identifiers. Lock
// names, tokens and durations are always parameters.

// sessionSetup pins, on the connections the driver opens for itself (its
// advisory sessions and its LISTEN connection), the settings that their
// locks depend on, over whatever the server, the database or the role
// sets (a pooled table-mode connection is left alone: its session may be
// shared through a pooler):
//
//   - statement_timeout 0: a wait in the server (pg_advisory_lock with
//     lock_timeout) ends at its own bound, not at a shorter global one
//     that would fail the Acquire; the driver bounds its statements with
//     their ctx (the server is asked to cancel) and StallTimeout.
//   - idle_session_timeout and idle_in_transaction_session_timeout 0: an
//     advisory session is idle between renewals while it holds its locks;
//     the server must not end it (freeing them under a live holder).
//   - TCP keepalives (10 s idle, then every 5 s, 3 probes) and
//     tcp_user_timeout (30 s): a holder whose host vanished (power loss,
//     partition) loses its locks in the server within about half a
//     minute, not after the operating system's two hours.
//
// A setting the server does not know (idle_session_timeout before
// PostgreSQL 14, tcp_user_timeout before 12) is skipped.
const sessionSetup = "SELECT count(set_config(name, value, false)) FROM (VALUES " +
	"('statement_timeout', '0'), ('idle_session_timeout', '0'), ('idle_in_transaction_session_timeout', '0'), " +
	"('tcp_keepalives_idle', '10'), ('tcp_keepalives_interval', '5'), ('tcp_keepalives_count', '3'), " +
	"('tcp_user_timeout', '30000')) AS v(name, value) WHERE name IN (SELECT name FROM pg_settings)"

// serverTimeSQL reads the server's wall clock now (clock_timestamp, not the
// transaction's start as now() would), the clock the locks' expiries use.
const serverTimeSQL = "SELECT clock_timestamp()"

// nextvalSQL takes the next fence of n's sequence.
func nextvalSQL(n names) string {
	return fmt.Sprintf("nextval('%s')", strings.ReplaceAll(n.sequence, "'", "''")) // (never holds a ': validated)
}

// maxPayload is the longest key sent as a NOTIFY payload (PostgreSQL refuses
// 8000 bytes and more); longer keys are released without a wake-up.
const maxPayload = 7999

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

// schemaObject is an object of the driver's schema: present is a SQL
// boolean telling whether it is in place, create the statements that put
// it in place.
type schemaObject struct {
	present string
	create  []string
}

// regclass is the SQL expression resolving the quoted, validated name.
func regclass(name string) string {
	return "to_regclass('" + strings.ReplaceAll(name, "'", "''") + "')" // (never holds a ': validated)
}

// baseSchema is what both drivers need: the fence sequence and the boot
// marker (boot.go), whose row is inserted with the table: a missing row
// means the server recovered from a crash since.
func baseSchema(n names) []schemaObject {
	return []schemaObject{
		{regclass(n.sequence) + " IS NOT NULL", []string{"CREATE SEQUENCE IF NOT EXISTS " + n.sequence}},
		{regclass(n.boot) + " IS NOT NULL", []string{
			"CREATE UNLOGGED TABLE IF NOT EXISTS " + n.boot + " (id boolean PRIMARY KEY)",
			"INSERT INTO " + n.boot + " VALUES (true) ON CONFLICT DO NOTHING",
		}},
	}
}

// ensureSchema creates the objects of b.schema that are missing, once per
// driver, serialised between drivers by a transaction-level advisory lock.
// It creates only what is missing: a role may use the objects without the
// right to create them.
func (b *base) ensureSchema(ctx context.Context, begin func(context.Context) (pgx.Tx, error)) error {
	return b.ddl.Ensure(ctx, func(ctx context.Context) error {
		tx, err := begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		// the DDL waits for the other drivers' (and for the tables' locks): a
		// role's lock_timeout or statement_timeout must not fail it, ctx bounds it
		if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', '0', true), set_config('statement_timeout', '0', true)"); err != nil {
			return err
		}
		// the commit is synchronous whatever the session's setting: a sequence
		// created in a commit a crash forgets would start again at 1
		q := "SELECT pg_advisory_xact_lock($1), set_config('synchronous_commit', 'on', true)"
		present := make([]bool, len(b.schema))
		dest := []any{nil, nil}
		for i, o := range b.schema {
			q += ", " + o.present
			dest = append(dest, &present[i])
		}
		if err := tx.QueryRow(ctx, q, ddlLockKey).Scan(dest...); err != nil {
			return err
		}
		for i, o := range b.schema {
			if present[i] {
				continue
			}
			for _, s := range o.create {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
		}
		return tx.Commit(ctx)
	})
}

// ddlLockKey serialises the drivers' CREATE statements (any constant works:
// a collision only makes two DDL transactions wait for each other).
const ddlLockKey int64 = 0x6d75746578667800 // "mutexfx\x00"

// The boot marker and the crash mark: fences that keep growing across a
// server crash (see docs/postgres.md).

// bootState is what a connection's bootCheck found: the server's crash
// mark, read before the check, and whether its commits may be
// asynchronous (guard): the table driver's fence-taking statements then
// compare the mark (guarded in table_sql.go). With synchronous commits a
// crash forgets no fence, and the plain statements save the comparison
// (≈ 8 µs per statement measured here: PostgreSQL 15 builds a snapshot of
// its shared statistics to answer it).
type bootState struct {
	mark  int64
	guard bool
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

// bootCheckSQL puts the marker's row back and, when it was missing, moves
// the fence sequence bootGap ahead, in one durable commit.
func bootCheckSQL(n names) string {
	seq := strings.ReplaceAll(n.sequence, "'", "''") // (never holds a ': validated)
	return "WITH s AS MATERIALIZED (SELECT set_config('synchronous_commit', 'on', true)), " +
		"i AS (INSERT INTO " + n.boot + " (id) SELECT true FROM s ON CONFLICT (id) DO NOTHING RETURNING id) " +
		fmt.Sprintf("SELECT setval('%s', nextval('%s') + %d) FROM i", seq, seq, bootGap)
}

// bootCheck runs, once per connection (pooled, or pinned in advisory
// mode), the statement that puts the boot marker's row back when a server
// crash emptied its unlogged table, and then moves the fence sequence
// bootGap ahead, in one synchronous commit. Every fence taken after a crash
// is then taken on a connection that ran the check after the crash:
// greater than the fences the crash made the sequence forget (taken in
// commits that were still in the WAL buffers: synchronous_commit off, the
// driver's or the server's). A crash ends the driver's own connections;
// for those that outlive it (a pooler's client connections), bootCheck
// returns the server's crash mark, read before the check, which table
// mode's fence-taking statements compare when commits may be asynchronous
// (bootState), and which it keeps in the connection's CustomData.
func (b *base) bootCheck(ctx context.Context, c *pgconn.PgConn) (bootState, error) {
	if bs, ok := c.CustomData()[b.bootKey].(bootState); ok {
		return bs, nil
	}
	// The mark first: a crash between the two statements leaves a stale
	// mark (the check runs again), never a stale check under a fresh mark.
	rr := c.ExecParams(ctx, "SELECT "+crashMarkSQL+", current_setting('synchronous_commit') = 'off'", nil, nil, nil, nil).Read()
	if rr.Err == nil && (len(rr.Rows) != 1 || len(rr.Rows[0]) != 2) {
		rr.Err = fmt.Errorf("unexpected reply: %d rows", len(rr.Rows))
	}
	var bs bootState
	if rr.Err == nil {
		bs.mark, rr.Err = strconv.ParseInt(string(rr.Rows[0][0]), 10, 64)
		// asynchronous in this session, or in the driver's own
		// transactions (a given pool: set per transaction)
		bs.guard = string(rr.Rows[0][1]) == "t" || b.opts.SynchronousCommit == "off"
	}
	if rr.Err != nil {
		return bootState{}, fmt.Errorf("postgres: crash mark: %w", rr.Err)
	}
	if err := c.ExecParams(ctx, b.boot, nil, nil, nil, nil).Read().Err; err != nil {
		return bootState{}, fmt.Errorf("postgres: boot marker %s: %w", b.names.boot, err)
	}
	c.CustomData()[b.bootKey] = bs
	return bs, nil
}
