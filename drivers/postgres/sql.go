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

// sessionSetup pins, on the driver's own connections (not pooled ones: a
// pooler may share their sessions), what their locks depend on: no
// statement or idle timeouts (ctx, lock_timeout and StallTimeout bound
// statements), TCP keepalives and user timeout (a vanished holder loses its
// locks within about 30 s). Settings the server lacks are skipped.
const sessionSetup = "SELECT count(set_config(name, value, false)) FROM (VALUES " +
	"('statement_timeout', '0'), ('idle_session_timeout', '0'), ('idle_in_transaction_session_timeout', '0'), " +
	"('tcp_keepalives_idle', '10'), ('tcp_keepalives_interval', '5'), ('tcp_keepalives_count', '3'), " +
	"('tcp_user_timeout', '30000')) AS v(name, value) WHERE name IN (SELECT name FROM pg_settings)"

// serverTimeSQL reads the server's clock now, not at the transaction's start.
const serverTimeSQL = "SELECT clock_timestamp()"

func nextvalSQL(n names) string { return "nextval('" + n.sequence + "')" }

// maxPayload is the longest NOTIFY payload (PostgreSQL refuses 8000 bytes).
const maxPayload = 7999

// payload is key as a NOTIFY payload, or "" (its waiters poll) when too
// long, not valid UTF-8 or holding NUL.
func payload(key string) string {
	if len(key) > maxPayload || !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
		return ""
	}
	return key
}

// schemaObject is a SQL test of an object's presence and its creation.
type schemaObject struct {
	present string
	create  []string
}

func regclass(name string) string { return "to_regclass('" + name + "')" }

// baseSchema is both drivers' fence sequence and boot marker (bootCheck).
func baseSchema(n names) []schemaObject {
	return []schemaObject{
		{regclass(n.sequence) + " IS NOT NULL", []string{"CREATE SEQUENCE IF NOT EXISTS " + n.sequence}},
		{regclass(n.boot) + " IS NOT NULL", []string{
			"CREATE UNLOGGED TABLE IF NOT EXISTS " + n.boot + " (id boolean PRIMARY KEY)",
			"INSERT INTO " + n.boot + " VALUES (true) ON CONFLICT DO NOTHING",
		}},
	}
}

// ensureSchema creates the missing objects of b.schema (only those: a role
// may use them without the right to create them), under ddlLockKey.
func (b *base) ensureSchema(ctx context.Context, begin func(context.Context) (pgx.Tx, error)) error {
	return b.ddl.Ensure(ctx, func(ctx context.Context) error {
		tx, err := begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		// ctx bounds the waits for the other drivers and the tables' locks
		if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', '0', true), set_config('statement_timeout', '0', true)"); err != nil {
			return err
		}
		// a synchronous commit: a sequence a crash forgets starts again at 1
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
			for j := 0; !present[i] && j < len(o.create); j++ {
				if _, err := tx.Exec(ctx, o.create[j]); err != nil {
					return err
				}
			}
		}
		return tx.Commit(ctx)
	})
}

// ddlLockKey serialises the drivers' CREATE statements.
const ddlLockKey int64 = 0x6d75746578667800 // "mutexfx\x00"

// bootState is what a connection's bootCheck found: the crash mark read
// before it, and guard: commits may be asynchronous, so the table
// driver's fence-taking statements compare the mark.
type bootState struct {
	mark  int64
	guard bool
}

// bootGap is how far a crash moves the fence sequence: past any it forgot.
const bootGap = 1 << 32

// crashMarkSQL is the server's crash mark: when its shared statistics were
// last reset (µs), by crash recovery, not a clean restart (by hand: extra
// checks only).
const crashMarkSQL = "coalesce((extract(epoch FROM pg_stat_get_bgwriter_stat_reset_time()) * 1000000)::bigint, 0)"

// bootCheckSQL puts the marker's row back and, when it was missing, moves
// the fence sequence bootGap ahead, in one durable commit.
func bootCheckSQL(n names) string {
	return "WITH s AS MATERIALIZED (SELECT set_config('synchronous_commit', 'on', true)), " +
		"i AS (INSERT INTO " + n.boot + " (id) SELECT true FROM s ON CONFLICT (id) DO NOTHING RETURNING id) " +
		fmt.Sprintf("SELECT setval('%s', %s + %d) FROM i", n.sequence, nextvalSQL(n), bootGap)
}

// bootCheck runs bootCheckSQL once per connection, keeping its result in
// CustomData (docs/postgres.md): a crash empties the marker's unlogged
// table, so every fence taken after it is taken on a connection checked
// after it, above those the crash made the sequence forget.
func (b *base) bootCheck(ctx context.Context, c *pgconn.PgConn) (bootState, error) {
	if bs, ok := c.CustomData()[b.bootKey].(bootState); ok {
		return bs, nil
	}
	// the mark first: a crash between the two leaves a stale mark, not a
	// stale check
	rr := c.ExecParams(ctx, "SELECT "+crashMarkSQL+", current_setting('synchronous_commit') = 'off'", nil, nil, nil, nil).Read()
	if rr.Err == nil && (len(rr.Rows) != 1 || len(rr.Rows[0]) != 2) {
		rr.Err = fmt.Errorf("unexpected reply: %d rows", len(rr.Rows))
	}
	var bs bootState
	if rr.Err == nil {
		bs.mark, rr.Err = strconv.ParseInt(string(rr.Rows[0][0]), 10, 64)
		// asynchronous in the session, or in the driver's transactions
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
