package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// core is what both mechanisms share. Close cuts the calls in flight
// (sqlkit.Life): the own pool's sockets, or with NewWithDB's pool their
// contexts (bind).
type core struct {
	db    *sql.DB
	ownDB bool
	socks *sockets // the own pool's sockets (socket.go); nil with NewWithDB
	s     settings
	life  sqlkit.Life
	ddl   sqlkit.Schema // the mechanism's tables (ready)
	subs  kit.Listeners
	mech  mechanism
}

// mechanism is what core calls of the advisory or table mechanism.
type mechanism interface {
	ensureSchema(ctx context.Context) error
	acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error)
	renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult
}

func (c *core) init(m mechanism, db *sql.DB, own bool, socks *sockets, s settings) {
	c.mech, c.db, c.ownDB, c.socks, c.s = m, db, own, socks, s
	c.life.Init()
}

// ready creates the mechanism's schema unless it is known to exist.
func (c *core) ready(ctx context.Context) error { return c.ddl.Ensure(ctx, c.mech.ensureSchema) }

// Subscribe calls fn with the driver's events until cancel is called or
// the driver closes: Released (a lock released through this driver; in
// table mode also a key found held that became free, polled every
// PollInterval), and in advisory mode Lost (a held lock's connection broke).
func (c *core) Subscribe(ctx context.Context, fn func(drivers.Event)) (func(), error) {
	if c.life.Closed() {
		return nil, ErrClosed
	}
	remove := c.subs.Add(fn)
	return func() { remove() }, nil
}

// close is Close (sqlkit.Life.Close): stop (the mechanism's goroutines
// and connections), then the subscribers and the own pool.
func (c *core) close(ctx context.Context, stop func()) error {
	return c.life.Close(ctx, "mysql", nil, func(context.Context) error {
		stop()
		if c.socks != nil {
			c.socks.Hup.Close()
		}
		c.subs.Clear()
		if c.ownDB {
			return c.db.Close()
		}
		return nil
	}, func() {
		if c.socks != nil {
			c.socks.Conns.Cut()
		}
	})
}

// bind is life.Bind, but for the own pool, whose sockets Close cuts.
func (c *core) bind(ctx context.Context) (context.Context, func()) {
	if c.socks != nil {
		return ctx, func() {}
	}
	return c.life.Bind(ctx)
}

// call runs f unless the driver is closed, with ctx bound and f's error
// marked (sqlkit.Life.ClosedErr).
func call[T any](c *core, ctx context.Context, f func(context.Context) (T, error)) (res T, err error) {
	if c.life.Closed() {
		return res, ErrClosed
	}
	ctx, stop := c.bind(ctx)
	defer stop()
	res, err = f(ctx)
	return res, c.life.ClosedErr(err)
}

// call2 is call for a call with two results.
func call2[A, B any](c *core, ctx context.Context, f func(context.Context) (A, B, error)) (a A, b B, err error) {
	_, err = call(c, ctx, func(ctx context.Context) (_ struct{}, err error) {
		a, b, err = f(ctx)
		return struct{}{}, err
	})
	return a, b, err
}

// Acquire makes one attempt to take req.Key for req.Token (in advisory
// mode blocking in the server up to req.Wait). Errors retrying cannot cure
// match drivers.ErrPermanent.
func (c *core) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	res, err := call(c, ctx, func(ctx context.Context) (drivers.AcquireResult, error) {
		if err := c.ready(ctx); err != nil {
			return drivers.AcquireResult{}, err
		}
		return c.mech.acquire(ctx, req)
	})
	return res, permanent(err)
}

// Renew renews many leases, with one statement per RenewBatch leases
// (advisory mode: checks that they are still held).
func (c *core) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	out, err := call(c, ctx, func(ctx context.Context) ([]drivers.RenewResult, error) { return c.mech.renew(ctx, leases), nil })
	if err != nil {
		return drivers.RenewFailed(len(leases), err)
	}
	for i := range out {
		out[i].Err = c.life.ClosedErr(out[i].Err)
	}
	return out
}

// querier is a pool or a transaction.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// queryRows scans each row of q into dest, then calls row.
func queryRows(ctx context.Context, db querier, q string, args []any, dest []any, row func()) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		row()
	}
	return rows.Err()
}

// marks is an IN list's placeholders: n times item ("?", "(?,?)").
func marks(item string, n int) string { return strings.TrimSuffix(strings.Repeat(item+",", n), ",") }

// Ping pings the server on one of the pool's connections.
func (c *core) Ping(ctx context.Context) error { return c.db.PingContext(ctx) }

// ServerTime returns the server's UTC_TIMESTAMP(6), table mode's expiry
// clock, read as µs since the epoch: time_zone, parseTime and loc do not
// shift it.
func (c *core) ServerTime(ctx context.Context) (time.Time, error) {
	return call(c, ctx, func(ctx context.Context) (time.Time, error) {
		var us int64
		const q = "SELECT " + epochMicros
		if err := c.db.QueryRowContext(ctx, q).Scan(&us); err != nil {
			return time.Time{}, fmt.Errorf("mysql: server time: %w", permanent(err))
		}
		return time.UnixMicro(us), nil
	})
}

// epochMicros is the server's UTC_TIMESTAMP(6) in µs since 1970: the
// clock of ServerTime and of table mode's fences (nextFence).
const epochMicros = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`

// errNumber returns the number of the server error err holds, 0 for none.
// The nil check comes before me is declared: &me escapes, so me is a heap
// allocation, which a nil err (most calls) must not pay.
func errNumber(err error) uint16 {
	if err == nil {
		return 0
	}
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// isErr reports whether err is a server error of one of numbers.
func isErr(err error, numbers ...uint16) bool { return slices.Contains(numbers, errNumber(err)) }

// retryable reports deadlocks (1213) and lock wait timeouts (1205).
func retryable(err error) bool { return isErr(err, 1213, 1205) }

// missingTable reports "table doesn't exist" (1146) or "unknown sequence"
// (MariaDB 4091): the schema is to be created again.
func missingTable(err error) bool { return isErr(err, 1146, 4091) }

// noBootSource reports that the server lacks the status table (1109,
// 1146, 3167: MySQL 5.7's disabled INFORMATION_SCHEMA.GLOBAL_STATUS) or
// denies it (1044, 1142, 1227).
func noBootSource(err error) bool { return isErr(err, 1044, 1109, 1142, 1146, 1227, 3167) }

// permanent marks err drivers.Permanent when retrying cannot cure it:
// refused credentials or privileges (1044, 1045, 1142, 1143, 1227, 1370,
// 1698), an unknown database (1049), an unsupported authentication method
// (1251); not a deadlock, too many connections, a shutdown or a fail-over.
func permanent(err error) error {
	if errors.Is(err, drivers.ErrPermanent) || !isErr(err, 1044, 1045, 1049, 1142, 1143, 1227, 1251, 1370, 1698) {
		return err
	}
	return drivers.Permanent(err)
}
