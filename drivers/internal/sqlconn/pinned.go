package sqlconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
)

// Statements on pinned connections run with a context that cannot be
// cancelled, and the caller's ends by closing the socket: go-sql-driver's
// watcher of a cancellable context costs two goroutine wake-ups per
// statement (20–25 µs on loopback, a sixth of a MySQL advisory
// acquire+release pair), and closes the socket too. Sockets are known only
// on the driver's own pool; elsewhere statements take the caller's context.

// Pinned is a connection a driver pinned and its socket (nil: unknown).
type Pinned[S any] struct {
	Conn *sql.Conn
	Sock *Socket[S]
}

// Pin takes a connection of db for the caller, with its socket if known.
func (s *Sockets[S]) Pin(ctx context.Context, db *sql.DB) (Pinned[S], error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return Pinned[S]{}, err
	}
	return Pinned[S]{conn, s.Of(conn)}, nil
}

// ArmHangup has fn called when the server closes or resets p's connection
// (without a socket, the driver's probes find out).
func (p Pinned[S]) ArmHangup(fn func()) {
	if p.Sock != nil {
		p.Sock.hup.Arm(fn)
	}
}

// DisarmHangup undoes ArmHangup: p's connection holds no lock now.
func (p Pinned[S]) DisarmHangup() {
	if p.Sock != nil {
		p.Sock.hup.Disarm()
	}
}

// QueryRow runs q on p's connection (Run) and scans its row into dest.
func (p Pinned[S]) QueryRow(ctx context.Context, q string, args []any, dest ...any) error {
	return p.Run(ctx, func(ctx context.Context) error {
		return p.Conn.QueryRowContext(ctx, q, args...).Scan(dest...)
	})
}

// Exec runs q on p's connection (Run).
func (p Pinned[S]) Exec(ctx context.Context, q string, args []any) (res sql.Result, err error) {
	err = p.Run(ctx, func(ctx context.Context) error {
		res, err = p.Conn.ExecContext(ctx, q, args...)
		return err
	})
	return res, err
}

// Run runs f, a statement on p's connection, with ctx, or with a context
// that cannot be cancelled while ctx's end closes the socket (the error
// then wraps ctx's cause).
func (p Pinned[S]) Run(ctx context.Context, f func(context.Context) error) error {
	if p.Sock == nil || ctx.Done() == nil {
		return f(ctx)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	stop := context.AfterFunc(ctx, p.Sock.cut)
	err := f(context.WithoutCancel(ctx))
	if !stop() {
		return fmt.Errorf("%w (statement: %v)", context.Cause(ctx), err)
	}
	return err
}

// Discard closes conn's session instead of returning it to the pool.
func Discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// Exec runs q on db; with a cancellable ctx and sockets known (s not nil),
// on a connection taken for it (Run), retried as database/sql does when
// the statement was not sent (driver.ErrBadConn).
func (s *Sockets[S]) Exec(ctx context.Context, db *sql.DB, q string, args []any) (sql.Result, error) {
	if s == nil || ctx.Done() == nil {
		return db.ExecContext(ctx, q, args...)
	}
	for attempt := 0; ; attempt++ {
		conn, err := db.Conn(ctx)
		if err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return nil, err
		}
		res, err := Pinned[S]{conn, s.Of(conn)}.Exec(ctx, q, args)
		if ctx.Err() != nil {
			Discard(conn) // its socket may be closed under it
		} else {
			conn.Close()
		}
		if attempt < 2 && errors.Is(err, driver.ErrBadConn) && ctx.Err() == nil {
			continue
		}
		return res, err
	}
}
