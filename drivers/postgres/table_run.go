package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// querier runs the table statements: a pooled connection bootCheck passed.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	// boot is what the connection's bootCheck found.
	boot() bootState
}

// checkedConn is a pooled connection and what its bootCheck found.
type checkedConn struct {
	*pgxpool.Conn
	b bootState
}

func (c checkedConn) boot() bootState { return c.b }

// getPool returns the pool, creating the owned one at first use. Creating a
// pool connects nothing.
func (d *tableDriver) getPool() (*pgxpool.Pool, error) {
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	if d.pool != nil {
		return d.pool, nil
	}
	if d.life.Closed() {
		return nil, ErrClosed
	}
	p, err := pgxpool.NewWithConfig(context.Background(), d.poolCfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: pool: %w", err)
	}
	d.pool = p
	return p, nil
}

// run runs f on a connection of the pool, with the schema in place,
// retrying serialization failures and deadlocks, and recreating the schema
// once if it was dropped. Close cuts it when Close's own ctx ends (the
// public calls then wrap its error with ErrClosed: closedErr).
func (d *tableDriver) run(ctx context.Context, f func(ctx context.Context, q querier) error) error {
	ctx, stop := d.bind(ctx)
	defer stop()
	p, err := d.getPool()
	if err != nil {
		return err
	}
	for again := true; ; again = false {
		if err := d.ensureSchema(ctx, p.Begin); err != nil {
			return fmt.Errorf("postgres: creating %s: %w", d.names.table, err)
		}
		err = retry(ctx, func() error {
			c, err := p.Acquire(ctx)
			if err != nil {
				return err
			}
			defer c.Release()
			pc := c.Conn().PgConn()
			b, err := d.bootCheck(ctx, pc)
			if err != nil {
				return err
			}
			err = f(ctx, checkedConn{c, b})
			if crashedSince(err) {
				// The server recovered from a crash since this
				// connection's check (it outlived the crash: a pooler's):
				// check again, then take the fence.
				delete(pc.CustomData(), d.bootKey)
				if b, err = d.bootCheck(ctx, pc); err != nil {
					return err
				}
				err = f(ctx, checkedConn{c, b})
			}
			return err
		})
		if again && sqlState(err) == "42P01" {
			d.ddl.Lost()
			continue
		}
		return err
	}
}

// crashedSince reports the failure of a fence-taking table statement whose
// guarded fence was NULL: the server's crash mark changed since the
// connection's bootCheck.
func crashedSince(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23502" && pe.ColumnName == "fence"
}

// fencing returns the fence-taking statements q must use, and the
// argument to append to theirs (the crash mark) when guarded.
func (d *tableDriver) fencing(q querier) (*fencedStatements, []any) {
	if b := q.boot(); b.guard {
		return &d.sql.guarded, []any{b.mark}
	}
	return &d.sql.plain, nil
}
