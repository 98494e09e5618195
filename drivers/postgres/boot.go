package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

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
