package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The boot marker and the crash mark: fences that keep growing across a
// server crash (see docs/postgres.md).

// checkedConn is a pooled connection and what its bootCheck found.
type checkedConn struct {
	*pgxpool.Conn
	b bootState
}

func (c checkedConn) boot() bootState { return c.b }

// bootState is what a connection's bootCheck found: the server's crash
// mark, read before the check, and whether its commits may be
// asynchronous (guard): the fence-taking statements then compare the mark
// (guarded in sql.go). With synchronous commits a crash forgets no fence,
// and the plain statements save the comparison (≈ 8 µs per statement
// measured here: PostgreSQL 15 builds a snapshot of its shared statistics
// to answer it).
type bootState struct {
	mark  int64
	guard bool
}

// fencing returns the fence-taking statements q must use, and the
// argument to append to theirs (the crash mark) when guarded.
func (d *Driver) fencing(q querier) (*fencedStatements, []any) {
	if b := q.boot(); b.guard {
		return &d.sql.guarded, []any{b.mark}
	}
	return &d.sql.plain, nil
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
func (d *Driver) bootCheck(ctx context.Context, c *pgconn.PgConn) (bootState, error) {
	if b, ok := c.CustomData()[d.bootKey].(bootState); ok {
		return b, nil
	}
	// The mark first: a crash between the two statements leaves a stale
	// mark (the check runs again), never a stale check under a fresh mark.
	rr := c.ExecParams(ctx, "SELECT "+crashMarkSQL+", current_setting('synchronous_commit') = 'off'", nil, nil, nil, nil).Read()
	if rr.Err == nil && (len(rr.Rows) != 1 || len(rr.Rows[0]) != 2) {
		rr.Err = fmt.Errorf("unexpected reply: %d rows", len(rr.Rows))
	}
	var b bootState
	if rr.Err == nil {
		b.mark, rr.Err = strconv.ParseInt(string(rr.Rows[0][0]), 10, 64)
		// asynchronous in this session, or in the driver's own
		// transactions (a given pool: set per transaction)
		b.guard = string(rr.Rows[0][1]) == "t" || d.opts.SynchronousCommit == "off"
	}
	if rr.Err != nil {
		return bootState{}, fmt.Errorf("postgres: crash mark: %w", rr.Err)
	}
	if err := c.ExecParams(ctx, d.sql.bootCheck, nil, nil, nil, nil).Read().Err; err != nil {
		return bootState{}, fmt.Errorf("postgres: boot marker %s: %w", d.names.boot, err)
	}
	c.CustomData()[d.bootKey] = b
	return b, nil
}

// crashedSince reports the failure of a fence-taking table statement whose
// guarded fence was NULL: the server's crash mark changed since the
// connection's bootCheck.
func crashedSince(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23502" && pe.ColumnName == "fence"
}
