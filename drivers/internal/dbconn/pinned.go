package dbconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
)

// Pinned is a connection a driver pinned and its socket (nil: unknown).
type Pinned[T any] struct {
	Conn *sql.Conn
	Sock *Socket[T]
}

// Pin takes a connection from db, with its socket if s knows it.
func (s *Sockets[T]) Pin(ctx context.Context, db *sql.DB) (Pinned[T], error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return Pinned[T]{}, err
	}
	return Pinned[T]{conn, s.Of(conn)}, nil
}

// ArmHangup has fn called when the server closes or resets p's connection
// (without a socket the driver's probes find out).
func (p Pinned[T]) ArmHangup(fn func()) {
	if p.Sock != nil {
		p.Sock.hup.Arm(fn)
	}
}

// DisarmHangup undoes ArmHangup: p's connection holds no lock now.
func (p Pinned[T]) DisarmHangup() {
	if p.Sock != nil {
		p.Sock.hup.Disarm()
	}
}

// QueryRow runs q on p's connection (Run) and scans its row into dest.
func (p Pinned[T]) QueryRow(ctx context.Context, q string, args []any, dest ...any) error {
	return p.Run(ctx, func(ctx context.Context) error {
		return p.Conn.QueryRowContext(ctx, q, args...).Scan(dest...)
	})
}

// Exec runs q on p's connection (Run).
func (p Pinned[T]) Exec(ctx context.Context, q string, args []any) (res sql.Result, err error) {
	err = p.Run(ctx, func(ctx context.Context) error {
		res, err = p.Conn.ExecContext(ctx, q, args...)
		return err
	})
	return res, err
}

// Run runs f, a statement on p's connection, with ctx, or with a context
// that cannot be cancelled while ctx's end closes the socket (the error
// then wraps ctx's cause).
func (p Pinned[T]) Run(ctx context.Context, f func(context.Context) error) error {
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

// Exec runs q on db, s's pool; with a cancellable ctx and s not nil, on a
// connection taken for it (Pinned.Run), retried as database/sql does when
// the statement was not sent (driver.ErrBadConn).
func (s *Sockets[T]) Exec(ctx context.Context, db *sql.DB, q string, args []any) (sql.Result, error) {
	if s == nil || ctx.Done() == nil {
		return db.ExecContext(ctx, q, args...)
	}
	for attempt := 0; ; attempt++ {
		p, err := s.Pin(ctx, db)
		if err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return nil, err
		}
		res, err := p.Exec(ctx, q, args)
		if ctx.Err() != nil {
			Discard(p.Conn) // its socket may be closed under it
		} else {
			p.Conn.Close()
		}
		if attempt < 2 && errors.Is(err, driver.ErrBadConn) && ctx.Err() == nil {
			continue
		}
		return res, err
	}
}

// Discard closes conn's session instead of returning it to the pool.
func Discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
