package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// querier runs the table statements: a pooled connection bootCheck passed (b).
type querier struct {
	*pgxpool.Conn
	b bootState
}

// getPool returns the pool, creating the owned one at first use.
func (d *tableDriver) getPool() (*pgxpool.Pool, error) {
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	if p := d.pool.Load(); p != nil {
		return p, nil
	}
	if d.life.Closed() {
		return nil, ErrClosed
	}
	p, err := pgxpool.NewWithConfig(context.Background(), d.poolCfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: pool: %w", err)
	}
	d.pool.Store(p)
	return p, nil
}

// run runs f on a pooled connection, retrying, the schema in place
// (recreated once if dropped). Close cuts it.
func (d *tableDriver) run(ctx context.Context, f func(ctx context.Context, q querier) error) error {
	if err := d.life.Check(ctx); err != nil {
		return err
	}
	ctx, stop := d.life.Bind(ctx)
	defer stop()
	p, err := d.getPool()
	if err != nil {
		return err
	}
	ensure := func() error {
		if err := d.ensureSchema(ctx, p.Begin); err != nil {
			return fmt.Errorf("postgres: creating %s: %w", d.names.table, err)
		}
		return nil
	}
	gone := func(err error) bool { return sqlState(err) == "42P01" || sqlState(err) == "42883" } // the table, or the wake function
	return d.ddl.Run(ensure, gone, func() error {
		return retry(ctx, func() error {
			c, err := p.Acquire(ctx)
			if err != nil {
				return err
			}
			defer c.Release()
			pc := c.Conn().PgConn()
			for checked := false; ; checked = true {
				b, err := d.bootCheck(ctx, pc)
				if err != nil {
					return err
				}
				var pe *pgconn.PgError
				if err = f(ctx, querier{c, b}); checked || !errors.As(err, &pe) || pe.Code != "23502" || pe.ColumnName != "fence" {
					return err
				}
				// a guarded fence was NULL: the crash mark changed since this
				// connection's check; check again
				delete(pc.CustomData(), d.bootKey)
			}
		})
	})
}

// queryRow runs, as run does, the statement and arguments stmt picks for
// the connection, scanning its row into dest; found: it returned one.
func (d *tableDriver) queryRow(ctx context.Context, stmt func(querier) (string, []any), dest ...any) (found bool, err error) {
	err = d.run(ctx, func(ctx context.Context, p querier) error {
		q, args := stmt(p)
		err := p.QueryRow(ctx, q, args...).Scan(dest...)
		found = err == nil
		return ignoreNoRows(err)
	})
	return found, err
}

// exec runs q with args as run does, returning how many rows it changed.
func (d *tableDriver) exec(ctx context.Context, q string, args ...any) (n int64, err error) {
	err = d.run(ctx, func(ctx context.Context, p querier) error {
		tag, err := p.Exec(ctx, q, args...)
		n = tag.RowsAffected()
		return err
	})
	return n, err
}

// fencing returns q's fence-taking statements and args, plus its crash mark if guarded.
func (d *tableDriver) fencing(q querier, args ...any) (*fencedStatements, []any) {
	if b := q.b; b.guard {
		return &d.sql.guarded, append(args, b.mark)
	}
	return &d.sql.plain, args
}

// Each driver that took locks deletes the free rows no live waiter queues
// for, every half of the longest ttl it took one with (internal/reclaim).
// Fences stay increasing across a deletion: a draw for an existing row is
// made under its lock; a draw for a row acquire did not see precedes its
// insert, and would be older than a row inserted, released and deleted in
// between. So acquire draws it holding the row's reclaim lock (a
// transaction-level advisory lock on its id) shared, and the reclaimer
// deletes a row only holding it exclusive, never waiting for it.

// reclaimBatch is the most rows one reclaim statement deletes.
const reclaimBatch = 256

// reclaimClass is the first key of a row's reclaim lock, the first four
// bytes of its id the second (two keys: apart from advisory mode's locks).
const reclaimClass = 0x6d757478 // "mutx"

// reclaimLockSQL takes row id's reclaim lock with fn:
// pg_advisory_xact_lock_shared (acquire) or pg_try_advisory_xact_lock.
func reclaimLockSQL(fn, id string) string {
	return fmt.Sprintf("%s(%d, ('x' || encode(substring(%s FROM 1 FOR 4), 'hex'))::bit(32)::int)", fn, reclaimClass, id)
}

// reclaimRound deletes up to reclaimBatch reclaimable rows.
func (d *tableDriver) reclaimRound(ctx context.Context) (int64, error) {
	return d.exec(ctx, d.sql.reclaim, reclaimBatch)
}
